//! Text bound for the terminal that came from outside (worker lines, names and messages in recordings, paths, and
//! the parser's own messages, which quote what a worker sent): its control characters are shown as escapes, never
//! sent raw, so that nothing golow prints can move the cursor, clear the screen, retitle the window or write the
//! clipboard (OSC 52); nor can it reorder what follows on the line with the bidirectional controls (U+202E, the
//! right-to-left override, makes `exe.txt` of `txt.exe`). The TUI needs none of this: ratatui's buffer drops
//! control characters, and these take no cell.

use std::borrow::Cow;

/// The bidirectional formatting characters: marks, embeddings, overrides and isolates.
fn bidirectional(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Columns between tab stops, as terminals set them.
const TAB_STOP: usize = 8;

/// `text` with its tabs expanded to spaces (to the next of every eighth column, as a terminal shows them), and every
/// other control character but the line break, and every bidirectional control, shown as its escape (`\u{1b}`,
/// `\u{202e}`).
pub fn printable(text: &str) -> Cow<'_, str> {
    let raw = |c: char| (c.is_control() && c != '\n') || bidirectional(c);
    if !text.chars().any(raw) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    let mut column = 0;
    for c in text.chars() {
        let before = shown.len();
        match c {
            '\t' => shown.extend(std::iter::repeat_n(' ', TAB_STOP - column % TAB_STOP)),
            '\n' => shown.push(c),
            c if raw(c) => shown.extend(c.escape_default()),
            c => shown.push(c),
        }
        column = if c == '\n' {
            0
        } else {
            column + shown[before..].chars().count()
        };
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn escapes_are_shown_not_sent() {
        assert!(matches!(
            printable("ok\nline"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}\u{1b}[2Jx\u{9b}y\n"),
            "\\u{1b}]0;pwned\\u{7}\\u{1b}[2Jx\\u{9b}y\n"
        );
        for c in [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}',
        ] {
            let name = format!("report{c}fdp.exe");
            assert_eq!(
                printable(&name),
                format!("report{}fdp.exe", c.escape_default())
            );
        }
        assert!(matches!(
            printable("naïve → ok ✓"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn tabs_are_expanded_to_the_next_tab_stop_as_a_terminal_shows_them() {
        assert_eq!(
            printable("epoch\t1\tloss\t0.25"),
            "epoch   1       loss    0.25"
        );
        assert_eq!(printable("\tx\n\ty"), "        x\n        y");
        assert_eq!(printable("12345678\tz"), "12345678        z");
        assert_eq!(
            printable("é\u{7}\tz"),
            "é\\u{7}  z",
            "an escape takes the columns it shows"
        );
    }
}
