//! Fills and borders written a row slice at a time: ratatui's `Block` draws one cell at a time through the
//! buffer's index and sweeps its whole area to style it, a tenth of a frame for the panes.

use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, BorderType, Clear, Widget};

use super::plain;

/// The `width` cells of row `y` from column `x`, as one slice: writing a row through it spares a position lookup
/// per cell (ratatui's indexing), which is what its widgets cost most per frame.
pub fn cells_of_row(buf: &mut Buffer, x: u16, y: u16, width: u16) -> &mut [Cell] {
    let start = buf.index_of(x, y);
    &mut buf.content[start..start + usize::from(width)]
}

/// Blanks every cell of `area` in `style`: a view starts what it draws with it, since the screen hands it the last
/// frame to draw over, not a cleared one.
pub fn fill(buf: &mut Buffer, area: Rect, style: Style) {
    let area = area.intersection(buf.area);
    if plain() {
        Clear.render(area, buf);
        buf.set_style(area, style);
        return;
    }
    let mut blank = Cell::EMPTY;
    blank.set_style(style);
    for y in area.top()..area.bottom() {
        for cell in cells_of_row(buf, area.x, y, area.width) {
            cell.clone_from(&blank);
        }
    }
}

/// A rounded border on the edge of `area` in `style`, with `title` in `title_style` on its top edge: the cells of
/// ratatui's `Block::bordered()` with those settings, on an area already filled.
pub fn border(buf: &mut Buffer, area: Rect, style: Style, title: &str, title_style: Style) {
    let area = area.intersection(buf.area);
    if plain() || area.width < 2 || area.height < 2 {
        // Borders that overlap follow ratatui's rules for those.
        Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(style)
            .title(title)
            .title_style(title_style)
            .render(area, buf);
        return;
    }
    let width = usize::from(area.width);
    let mut row = |y: u16, left: char, right: char| {
        for (i, cell) in cells_of_row(buf, area.x, y, area.width)
            .iter_mut()
            .enumerate()
        {
            let glyph = match i {
                0 => left,
                i if i + 1 == width => right,
                _ => '─',
            };
            cell.set_char(glyph).set_style(style);
        }
    };
    row(area.top(), '╭', '╮');
    row(area.bottom() - 1, '╰', '╯');
    for y in area.top() + 1..area.bottom() - 1 {
        for x in [area.left(), area.right() - 1] {
            buf[(x, y)].set_char('│').set_style(style);
        }
    }
    buf.set_stringn(area.x + 1, area.y, title, width - 2, title_style);
}
