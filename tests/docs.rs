//! The README and the user guide (docs/) held to the code: every flag table of docs/commands.md to golow's command
//! line, every relative link and anchor to the file and heading it names, the README to its size, and the README's
//! picture to the live view as it draws a real recording.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use golow::ui::theme::{self, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::style::{Color, Modifier};

/// The README introduces; the reference is the guide's. Past this size, move the text there.
const README_MAX_BYTES: u64 = 15 * 1024;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path` as the messages name it: from the repository's root.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn the_readme_stays_an_introduction() {
    let size = std::fs::metadata(root().join("README.md")).unwrap().len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, past {README_MAX_BYTES}: move the reference text into docs/"
    );
}

// The flag tables.

/// The long flags each table of docs/commands.md names, by subcommand: the tables between `<!-- flags: NAME -->` and
/// `<!-- /flags -->`, read from their first column.
fn documented_flags(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut tables = BTreeMap::new();
    for (start, _) in page.match_indices("<!-- flags: ") {
        let rest = &page[start + "<!-- flags: ".len()..];
        let name = rest[..rest.find(" -->").expect("a closed flags marker")].to_owned();
        let table = &rest[..rest
            .find("<!-- /flags -->")
            .unwrap_or_else(|| panic!("the flags table of {name} has no <!-- /flags -->"))];
        let flags = table
            .lines()
            .filter(|line| {
                line.starts_with('|') && !line.starts_with("| flag ") && !line.starts_with("| ---")
            })
            // `\|` is a bar inside a cell (`on\|off`), not the cell's end.
            .filter_map(|line| line.replace("\\|", "/").split('|').nth(1).map(long_flags))
            .flatten()
            .collect();
        tables.insert(name, flags);
    }
    tables
}

/// Every `--name` in a table cell.
fn long_flags(cell: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let mut rest = cell;
    while let Some(at) = rest.find("--") {
        let name: String = rest[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() {
            flags.push(format!("--{name}"));
        }
        rest = &rest[at + 2 + name.len()..];
    }
    flags
}

/// The long flags of each subcommand, as clap defines them.
fn command_line_flags() -> BTreeMap<String, BTreeSet<String>> {
    golow::cli::command()
        .get_subcommands()
        .map(|sub| {
            let flags = sub
                .get_arguments()
                .filter_map(|arg| arg.get_long())
                .map(|long| format!("--{long}"))
                .collect();
            (sub.get_name().to_owned(), flags)
        })
        .collect()
}

#[test]
fn the_guide_names_every_subcommand_and_flag_and_no_other() {
    let documented = documented_flags(&read(&root().join("docs/commands.md")));
    let defined = command_line_flags();
    assert!(defined.contains_key("run") && defined["run"].contains("--impl"));
    let mut problems = Vec::new();
    for (command, flags) in &defined {
        let Some(table) = documented.get(command) else {
            problems.push(format!(
                "golow {command} has no flag table (<!-- flags: {command} --> … <!-- /flags -->)"
            ));
            continue;
        };
        for flag in flags.difference(table) {
            problems.push(format!("golow {command} {flag} is missing from its table"));
        }
        for flag in table.difference(flags) {
            problems.push(format!(
                "golow {command}'s table names {flag}, which golow {command} does not have"
            ));
        }
    }
    for command in documented.keys().filter(|c| !defined.contains_key(*c)) {
        problems.push(format!(
            "a flag table for golow {command}, which is no subcommand"
        ));
    }
    assert!(
        problems.is_empty(),
        "docs/commands.md and golow's command line (src/cli/) differ:\n{}",
        problems.join("\n")
    );
}

// Links and anchors.

/// The text with fenced code blocks and inline code blanked out, newlines kept, so that what looks like a link or a
/// heading inside code is neither, and byte offsets still give line numbers.
fn outside_code(text: &str) -> String {
    let mut prose = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            prose.push('\n');
        } else if fenced {
            prose.push('\n');
        } else {
            prose.push_str(line);
        }
    }
    // A code span runs from a run of backticks to the next run of the same length, across lines.
    let mut out = String::with_capacity(prose.len());
    let mut rest = prose.as_str();
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let ticks = rest[open..].len() - rest[open..].trim_start_matches('`').len();
        let fence = &rest[open..open + ticks];
        let body = &rest[open + ticks..];
        let Some(close) = find_run(body, fence) else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        out.push_str(&" ".repeat(ticks));
        out.extend(
            body[..close]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        out.push_str(&" ".repeat(ticks));
        rest = &body[close + ticks..];
    }
    out.push_str(rest);
    out
}

/// Where in `text` a run of backticks exactly as long as `fence` begins.
fn find_run(text: &str, fence: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find(fence) {
        let at = from + at;
        let after = &text[at + fence.len()..];
        if !after.starts_with('`') {
            return Some(at);
        }
        from = at + fence.len() + (after.len() - after.trim_start_matches('`').len());
    }
    None
}

/// The targets of the text's inline links and images, `[text](target)`, each with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = outside_code(text);
    prose
        .match_indices("](")
        .filter_map(|(at, _)| {
            let target = &prose[at + 2..];
            let end = target.find([')', ' ', '\n'])?;
            let line = prose[..at].matches('\n').count() + 1;
            Some((line, target[..end].to_owned()))
        })
        .collect()
}

/// GitHub's anchor for a heading: its text lower-cased, everything but letters, digits, spaces, `-` and `_` dropped,
/// spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text as GitHub renders it: a link's text without its target.
fn heading_text(line: &str) -> String {
    let mut text = String::new();
    let mut rest = line.trim_start_matches('#').trim();
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = &rest[at + 2..];
        rest = &rest[rest.find(')').map_or(rest.len(), |end| end + 1)..];
    }
    text.push_str(rest);
    text.replace('[', "")
}

/// The anchors of a Markdown page: one per heading, a repeated one numbered `-1`, `-2`… as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fenced = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&heading_text(line));
        let count = seen.entry(base.clone()).or_default();
        anchors.insert(match *count {
            0 => base.clone(),
            n => format!("{base}-{n}"),
        });
        *count += 1;
    }
    anchors
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug(&heading_text("## `golow run`")), "golow-run");
    assert_eq!(
        slug(&heading_text("## `golow-worker` (started by `golow run`)")),
        "golow-worker-started-by-golow-run"
    );
    assert_eq!(slug(&heading_text("## `--threads N`")), "--threads-n");
    assert_eq!(
        slug(&heading_text(
            "# Methodology: what makes the comparison fair"
        )),
        "methodology-what-makes-the-comparison-fair"
    );
    assert_eq!(
        anchors("# A\n```sh\n# not a heading\n```\n## A\n## a\n")
            .into_iter()
            .collect::<Vec<_>>(),
        ["a", "a-1", "a-2"]
    );
    assert_eq!(
        links("[x](a.md) `[y](b.md)` and `` a ` [z](c.md) ``\n```\n[w](d.md)\n```\n![p](e.svg)"),
        [(1, "a.md".to_owned()), (5, "e.svg".to_owned())]
    );
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut anchors_of: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut problems = Vec::new();
    for page in common::documentation_pages() {
        let text = read(&page);
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let at = format!("{}:{line}: {target}", shown(&page));
            if !file.exists() {
                problems.push(format!("{at}: no such file"));
                continue;
            }
            if fragment.is_empty() {
                continue;
            }
            let anchors = anchors_of
                .entry(file.clone())
                .or_insert_with(|| anchors(&read(&file)));
            if !anchors.contains(fragment) {
                problems.push(format!("{at}: {} has no heading #{fragment}", shown(&file)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

// The picture.

/// A real session: an H100 training ResNet-50 at four levels, alternating.
const RECORDING: &str = "recordings/20261126-h100-levels-train-b32.golow";
const PICTURE: &str = "docs/live-view.svg";
const BLESS_ENV: &str = "GOLOW_BLESS_PICTURE";
const THEME: &str = "dark";
const COLUMNS: u16 = 120;
const ROWS: u16 = 44;

/// The dashboard at the end of the recording, folded as `golow replay` folds it.
fn dashboard(theme: &Theme) -> Buffer {
    let mut player = golow::recording::Player::open(&root().join(RECORDING)).unwrap();
    player.run_to_end();
    let state = player.into_state();
    let mut app = golow::ui::app::App::new(theme.clone(), None);
    let mut terminal = Terminal::new(TestBackend::new(COLUMNS, ROWS)).unwrap();
    terminal.draw(|frame| app.draw(frame, &state)).unwrap();
    terminal.backend().buffer().clone()
}

#[test]
fn the_readme_picture_is_the_live_view_of_a_real_recording() {
    let theme = theme::builtin(THEME).unwrap();
    let buffer = dashboard(&theme);
    let screen: String = buffer.content().iter().map(Cell::symbol).collect();
    for level in ["libtorch", "aten", "cudnn", "pytorch"] {
        assert!(
            screen.contains(level),
            "{level} is not on the dashboard of {RECORDING}"
        );
    }
    let picture = svg(&buffer, &theme);
    let path = root().join(PICTURE);
    if std::env::var_os(BLESS_ENV).is_some() {
        std::fs::write(&path, &picture).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == picture,
        "{PICTURE} is not the live view of {RECORDING} as this build draws it: if the view changed as meant, draw it \
         again with {BLESS_ENV}=1 cargo test --release --test docs, and check it in"
    );
}

/// Cell size in pixels: a monospace font of 15 px advances about 9 px a character.
const CELL_WIDTH: u32 = 9;
const CELL_HEIGHT: u32 = 18;
const BASELINE: u32 = 14;

/// The 16 ANSI colours as xterm draws them, for named and low indexed colours.
const ANSI: [(u8, u8, u8); 16] = [
    (0x00, 0x00, 0x00),
    (0xcd, 0x00, 0x00),
    (0x00, 0xcd, 0x00),
    (0xcd, 0xcd, 0x00),
    (0x00, 0x00, 0xee),
    (0xcd, 0x00, 0xcd),
    (0x00, 0xcd, 0xcd),
    (0xe5, 0xe5, 0xe5),
    (0x7f, 0x7f, 0x7f),
    (0xff, 0x00, 0x00),
    (0x00, 0xff, 0x00),
    (0xff, 0xff, 0x00),
    (0x5c, 0x5c, 0xff),
    (0xff, 0x00, 0xff),
    (0x00, 0xff, 0xff),
    (0xff, 0xff, 0xff),
];

/// A colour's red, green and blue; `Reset`, the terminal's own colour, is `reset`.
fn rgb(color: Color, reset: (u8, u8, u8)) -> (u8, u8, u8) {
    match color {
        Color::Reset => reset,
        Color::Rgb(r, g, b) => (r, g, b),
        Color::Indexed(i) => indexed(i),
        Color::Black => ANSI[0],
        Color::Red => ANSI[1],
        Color::Green => ANSI[2],
        Color::Yellow => ANSI[3],
        Color::Blue => ANSI[4],
        Color::Magenta => ANSI[5],
        Color::Cyan => ANSI[6],
        Color::Gray => ANSI[7],
        Color::DarkGray => ANSI[8],
        Color::LightRed => ANSI[9],
        Color::LightGreen => ANSI[10],
        Color::LightYellow => ANSI[11],
        Color::LightBlue => ANSI[12],
        Color::LightMagenta => ANSI[13],
        Color::LightCyan => ANSI[14],
        Color::White => ANSI[15],
    }
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The theme's text and background colours, where a theme that says `reset` gets a terminal's usual grey on black.
fn theme_colors(theme: &Theme) -> ((u8, u8, u8), (u8, u8, u8)) {
    (
        rgb(theme.foreground, ANSI[7]),
        rgb(theme.background, ANSI[0]),
    )
}

/// xterm's 256 colours: the 16 ANSI ones, a 6×6×6 cube, then 24 greys.
fn indexed(i: u8) -> (u8, u8, u8) {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match i {
        0..=15 => ANSI[usize::from(i)],
        16..=231 => {
            let i = usize::from(i - 16);
            (LEVELS[i / 36], LEVELS[i / 6 % 6], LEVELS[i % 6])
        }
        _ => {
            let grey = 8 + 10 * (i - 232);
            (grey, grey, grey)
        }
    }
}

/// How a cell is painted: its text's colour, its background's, and its font's modifiers.
#[derive(Clone, PartialEq)]
struct FrameShape {
    fg: String,
    bg: String,
    modifier: Modifier,
}

fn look(cell: &Cell, theme: &Theme) -> FrameShape {
    let (foreground, background) = theme_colors(theme);
    let (fg, bg) = (hex(rgb(cell.fg, foreground)), hex(rgb(cell.bg, background)));
    let (fg, bg) = if cell.modifier.contains(Modifier::REVERSED) {
        (bg, fg)
    } else {
        (fg, bg)
    };
    FrameShape {
        fg,
        bg,
        modifier: cell.modifier,
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The buffer as an SVG: the theme's background, a `<rect>` per run of cells on another background and a `<text>`
/// per run of cells painted alike, each stretched to its cells' width so that any monospace font lines up.
fn svg(buffer: &Buffer, theme: &Theme) -> String {
    let area = buffer.area;
    let (width, height) = (
        u32::from(area.width) * CELL_WIDTH,
        u32::from(area.height) * CELL_HEIGHT,
    );
    let background = hex(theme_colors(theme).1);
    let mut out = String::new();
    writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xml:space=\"preserve\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">"
    )
    .unwrap();
    out.push_str(
        "<style>text{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:15px;white-space:pre}</style>\n",
    );
    writeln!(
        out,
        "<rect width=\"{width}\" height=\"{height}\" fill=\"{background}\"/>"
    )
    .unwrap();
    for y in 0..area.height {
        let row: Vec<(&str, FrameShape)> = (0..area.width)
            .map(|x| {
                let cell = &buffer[(area.x + x, area.y + y)];
                (cell.symbol(), look(cell, theme))
            })
            .collect();
        let top = u32::from(y) * CELL_HEIGHT;
        let mut x = 0;
        for run in row.chunk_by(|a, b| a.1 == b.1) {
            let (left, cells) = (x * CELL_WIDTH, run.len() as u32);
            x += cells;
            let look = &run[0].1;
            if look.bg != background {
                writeln!(
                    out,
                    "<rect x=\"{left}\" y=\"{top}\" width=\"{}\" height=\"{CELL_HEIGHT}\" fill=\"{}\"/>",
                    cells * CELL_WIDTH,
                    look.bg
                )
                .unwrap();
            }
            let text: String = run.iter().map(|(symbol, _)| *symbol).collect();
            if text.trim().is_empty() {
                continue;
            }
            let mut style = String::new();
            if look.modifier.contains(Modifier::BOLD) {
                style.push_str(" font-weight=\"bold\"");
            }
            if look.modifier.contains(Modifier::ITALIC) {
                style.push_str(" font-style=\"italic\"");
            }
            if look.modifier.contains(Modifier::UNDERLINED) {
                style.push_str(" text-decoration=\"underline\"");
            }
            if look.modifier.contains(Modifier::DIM) {
                style.push_str(" opacity=\"0.6\"");
            }
            writeln!(
                out,
                "<text x=\"{left}\" y=\"{}\" textLength=\"{}\" lengthAdjust=\"spacingAndGlyphs\" fill=\"{}\"{style}>{}</text>",
                top + BASELINE,
                cells * CELL_WIDTH,
                look.fg,
                escape(&text)
            )
            .unwrap();
        }
    }
    out.push_str("</svg>\n");
    out
}

// The examples of a user's own script: run under `--cmd`, and attached to while it ran.

/// Real sessions of `tests/examples/slow_data.py`, a script waiting on its DataLoader, recorded on this project's
/// 2-core machine: each recording, the command shown before what it printed, and the pages that show it.
const SCRIPT_EXAMPLES: [(&str, &str, &[&str]); 2] = [
    (
        "recordings/20261127-cpu-slow-data.golow",
        "$ golow run --headless --warmup 5 --cmd \"slow_data=python slow_data.py\"",
        &["README.md", "docs/your-own-command.md"],
    ),
    (
        "recordings/20261128-cpu-attach-slow-data.golow",
        "$ golow attach $(pgrep -f slow_data.py) --headless --duration 6",
        &["README.md", "docs/attach.md"],
    ),
];

/// The lines after `command` in the code block that shows it, each with its wrapped continuation lines (indented by
/// two spaces) joined back on.
fn shown_output(page: &str, command: &str) -> Vec<String> {
    let mut lines = page
        .lines()
        .skip_while(|line| *line != command)
        .skip(1)
        .take_while(|line| !line.starts_with("```"));
    let mut joined: Vec<String> = Vec::new();
    for line in lines.by_ref() {
        match (line.strip_prefix("  "), joined.last_mut()) {
            (Some(rest), Some(last)) => {
                last.push(' ');
                last.push_str(rest);
            }
            _ => joined.push(line.to_string()),
        }
    }
    joined
}

#[test]
fn the_guides_script_examples_are_their_recordings_replayed() {
    for (recording, command, pages) in SCRIPT_EXAMPLES {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_golow"))
            .args(["replay", "--headless"])
            .arg(root().join(recording))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let replayed = String::from_utf8(out.stdout).unwrap();
        // Past the session's title: what golow says of the script under the table.
        let said: Vec<&str> = replayed
            .lines()
            .skip(1)
            .filter(|line| line.starts_with("slow_data: "))
            .collect();
        assert!(
            said.len() >= 2,
            "the script's line and its verdict: {replayed}"
        );
        for page in pages {
            let shown = shown_output(&read(&root().join(page)), command);
            assert_eq!(
                shown, said,
                "{page}: the example must be what `golow replay --headless {recording}` prints"
            );
        }
    }
}
