//! The one key map: every key binding of every view, with what it does. The views ask it what a key means, and
//! their footers, the help overlay and the user guide's key tables (docs/live-view.md) are all made from it (a test
//! compares the guide's tables with [`markdown`]).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The full-screen views that take keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Live,
    Replay,
    /// The sweep view while the sweep runs.
    Sweep,
    /// The sweep view of a sweep that has ended, or of a recorded one.
    SweepEnded,
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Stop what runs, then leave (the live view asks the session; a sweep view stops the sweep first).
    Quit,
    /// Live: freeze the view while collection goes on.
    Pause,
    /// Live: move the time window back (true) or forward.
    Scroll {
        back: bool,
    },
    ZoomIn,
    ZoomOut,
    /// Dashboard ↔ compare view.
    Compare,
    /// The pane with this index, alone; `None`: back to the dashboard (and out of the help).
    Maximise(Option<usize>),
    /// A key for the maximised pane itself.
    Pane(KeyCode),
    /// Live: ask which worker to stop.
    StopWorker,
    /// Open the workers' output.
    Output,
    Theme,
    Help,
    /// Replay: the timeline's clock.
    Timeline(Clock),
    /// The sweep view's axes.
    Axes(Axes),
}

/// What the replay's timeline is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    PlayPause,
    Slower,
    Faster,
    /// ±10 s.
    Jump {
        back: bool,
    },
    Start,
    End,
    /// Open the prompt for a time to jump to.
    JumpTo,
}

/// What the sweep view's axes are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    /// Batch size ↔ resolution along x.
    Switch,
    /// The value the other axis is held at, one down (true) or up.
    Held { down: bool },
}

/// One binding: the keys as people read them, what they do, where, and how the footer says it there.
pub struct Binding {
    pub keys: &'static str,
    pub does: &'static str,
    pub views: &'static [View],
    /// The footer's words for it, per view; a view not named here leaves it out of its footer.
    pub footer: &'static [(View, &'static str)],
    /// What a key means here; `None` when it is not this binding's.
    command: fn(&KeyEvent) -> Option<Command>,
}

impl Binding {
    fn applies_in(&self, view: View) -> bool {
        self.views.contains(&view)
    }
}

use View::{Live, Replay, Sweep, SweepEnded};

fn char_key(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => Some(c),
        _ => None,
    }
}

fn quit(key: &KeyEvent) -> Option<Command> {
    let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    (ctrl_c || key.code == KeyCode::Char('q')).then_some(Command::Quit)
}

/// Every binding, in the order footers and the help list them.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: "q, Ctrl-C",
        does: "stop the workers gracefully, then quit",
        views: &[Live],
        footer: &[(Live, "q quit")],
        command: quit,
    },
    Binding {
        keys: "q, Ctrl-C",
        does: "quit",
        views: &[Replay],
        footer: &[(Replay, "q quit")],
        command: quit,
    },
    Binding {
        keys: "space",
        does: "pause the view (collection continues)",
        views: &[Live],
        footer: &[(Live, "space pause")],
        command: |k| (char_key(k) == Some(' ')).then_some(Command::Pause),
    },
    Binding {
        keys: "space",
        does: "play/pause",
        views: &[Replay],
        footer: &[(Replay, "space play/pause")],
        command: |k| (char_key(k) == Some(' ')).then_some(Command::Timeline(Clock::PlayPause)),
    },
    Binding {
        keys: "[ ]",
        does: "speed 0.25×–16×",
        views: &[Replay],
        footer: &[(Replay, "[/] speed")],
        command: |k| match char_key(k) {
            Some('[') => Some(Command::Timeline(Clock::Slower)),
            Some(']') => Some(Command::Timeline(Clock::Faster)),
            _ => None,
        },
    },
    Binding {
        keys: "← / →",
        does: "scroll the time window back / forward",
        views: &[Live],
        footer: &[(Live, "←/→ scroll")],
        command: |k| match k.code {
            KeyCode::Left => Some(Command::Scroll { back: true }),
            KeyCode::Right => Some(Command::Scroll { back: false }),
            _ => None,
        },
    },
    Binding {
        keys: "←/→",
        does: "±10 s",
        views: &[Replay],
        footer: &[(Replay, "←/→ ±10 s")],
        command: |k| match k.code {
            KeyCode::Left => Some(Command::Timeline(Clock::Jump { back: true })),
            KeyCode::Right => Some(Command::Timeline(Clock::Jump { back: false })),
            _ => None,
        },
    },
    Binding {
        keys: "g/G",
        does: "start/end",
        views: &[Replay],
        footer: &[(Replay, "g/G start/end")],
        command: |k| match (k.code, char_key(k)) {
            (KeyCode::Home, _) | (_, Some('g')) => Some(Command::Timeline(Clock::Start)),
            (KeyCode::End, _) | (_, Some('G')) => Some(Command::Timeline(Clock::End)),
            _ => None,
        },
    },
    Binding {
        keys: "j",
        does: "jump to a time (s, m:ss or h:mm:ss)",
        views: &[Replay],
        footer: &[(Replay, "j jump")],
        command: |k| (char_key(k) == Some('j')).then_some(Command::Timeline(Clock::JumpTo)),
    },
    Binding {
        keys: "+ / -",
        does: "zoom the time window in / out",
        views: &[Live, Replay],
        footer: &[(Live, "+/- zoom"), (Replay, "+/- zoom")],
        command: |k| match char_key(k) {
            Some('+' | '=') => Some(Command::ZoomIn),
            Some('-') => Some(Command::ZoomOut),
            _ => None,
        },
    },
    Binding {
        keys: "tab, c",
        does: "switch between dashboard and compare view",
        views: &[Live, Replay],
        footer: &[(Live, "tab/c compare"), (Replay, "tab/c compare")],
        command: |k| {
            (k.code == KeyCode::Tab || char_key(k) == Some('c')).then_some(Command::Compare)
        },
    },
    Binding {
        keys: "1 … 9, 0, p",
        does: "maximise a pane (dashboard order; 9: ranks, 0: operators, p: step phases); the same key again or Esc back",
        views: &[Live, Replay],
        footer: &[
            (Live, "1-9,0,p maximise, Esc back"),
            (Replay, "1-9,0,p maximise"),
        ],
        command: |k| match (k.code, char_key(k)) {
            (_, Some(c @ '1'..='9')) => Some(Command::Maximise(Some(c as usize - '1' as usize))),
            (_, Some('0')) => Some(Command::Maximise(Some(9))),
            (_, Some('p')) => Some(Command::Maximise(Some(super::panes::PHASES))),
            (KeyCode::Esc, _) => Some(Command::Maximise(None)),
            _ => None,
        },
    },
    Binding {
        keys: "↑ / ↓",
        does: "in the maximised kernels or operators pane: the kernel whose grids show, the operator charted",
        views: &[Live, Replay],
        footer: &[],
        command: |k| matches!(k.code, KeyCode::Up | KeyCode::Down).then_some(Command::Pane(k.code)),
    },
    Binding {
        keys: "Enter",
        does: "in the maximised ranks pane: a line per rank ↔ the band",
        views: &[Live, Replay],
        footer: &[],
        command: |k| (k.code == KeyCode::Enter).then_some(Command::Pane(k.code)),
    },
    Binding {
        keys: "mouse",
        does: "click a pane to maximise it, click again to go back",
        views: &[Live, Replay],
        footer: &[],
        command: |_| None,
    },
    Binding {
        keys: "s, then N",
        does: "stop worker N",
        views: &[Live],
        footer: &[(Live, "s stop a worker")],
        command: |k| (char_key(k) == Some('s')).then_some(Command::StopWorker),
    },
    Binding {
        keys: "o",
        does: "a worker's output (↑/↓ PgUp/PgDn scroll, ←/→ worker)",
        views: &[Live, Replay],
        footer: &[(Live, "o output"), (Replay, "o output")],
        command: |k| (char_key(k) == Some('o')).then_some(Command::Output),
    },
    Binding {
        keys: "t",
        does: "next colour theme",
        views: &[Live, Replay],
        footer: &[(Live, "t theme"), (Replay, "t theme")],
        command: |k| (char_key(k) == Some('t')).then_some(Command::Theme),
    },
    Binding {
        keys: "?",
        does: "this help",
        views: &[Live, Replay],
        footer: &[(Live, "? help"), (Replay, "? help")],
        command: |k| (char_key(k) == Some('?')).then_some(Command::Help),
    },
    Binding {
        keys: "q, Ctrl-C",
        does: "stop the sweep (the finished cells are kept; it resumes with --resume), then quit",
        views: &[Sweep, SweepEnded],
        footer: &[
            (Sweep, "q stop the sweep (resume later with --resume)"),
            (SweepEnded, "q quit"),
        ],
        command: quit,
    },
    Binding {
        keys: "x",
        does: "batch size or resolution along the x axis",
        views: &[Sweep, SweepEnded],
        footer: &[
            (Sweep, "x batch size / resolution axis"),
            (SweepEnded, "x batch size / resolution axis"),
        ],
        command: |k| (char_key(k) == Some('x')).then_some(Command::Axes(Axes::Switch)),
    },
    Binding {
        keys: "[ ]",
        does: "the value the other axis is held at",
        views: &[Sweep, SweepEnded],
        footer: &[
            (Sweep, "[ ] the other axis's value"),
            (SweepEnded, "[ ] the other axis's value"),
        ],
        command: |k| match char_key(k) {
            Some('[') => Some(Command::Axes(Axes::Held { down: true })),
            Some(']') => Some(Command::Axes(Axes::Held { down: false })),
            _ => None,
        },
    },
];

/// What `key` asks for in `view`, if anything.
pub fn command(view: View, key: &KeyEvent) -> Option<Command> {
    BINDINGS
        .iter()
        .filter(|b| b.applies_in(view))
        .find_map(|b| (b.command)(key))
}

/// The footer of `view`: its bindings as the footer says them.
pub fn footer(view: View) -> String {
    footer_within(view, usize::MAX)
}

/// `view`'s footer in `width` columns: the items that fit whole, in order, and the last (the help's key) always.
pub fn footer_within(view: View, width: usize) -> String {
    let items: Vec<&str> = BINDINGS
        .iter()
        .filter_map(|b| b.footer.iter().find(|(v, _)| *v == view).map(|(_, f)| *f))
        .collect();
    let Some((last, rest)) = items.split_last() else {
        return String::new();
    };
    let mut shown: Vec<&str> = Vec::new();
    let room = |shown: &[&str], next: &str| {
        let used: usize = shown.iter().map(|s| s.chars().count() + 3).sum();
        1 + used + next.chars().count() + 3 + last.chars().count() <= width
    };
    for item in rest {
        if !room(&shown, item) {
            break;
        }
        shown.push(item);
    }
    shown.push(last);
    format!(" {}", shown.join(" · "))
}

/// The bindings of `view`, as the help overlay and the user guide list them.
pub fn of(view: View) -> impl Iterator<Item = &'static Binding> {
    BINDINGS.iter().filter(move |b| b.applies_in(view))
}

/// The bindings of `view` that `other` does not have (the replay's own, beside the live view's).
pub fn only_in(view: View, other: View) -> impl Iterator<Item = &'static Binding> {
    of(view).filter(move |b| !b.applies_in(other))
}

/// The user guide's table of `bindings`.
pub fn markdown<'a>(bindings: impl Iterator<Item = &'a Binding>) -> String {
    let mut table = String::from("| key | does |\n| --- | --- |\n");
    for b in bindings {
        table.push_str(&format!("| {} | {} |\n", b.keys, b.does));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn each_view_reads_a_key_its_own_way() {
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for view in [Live, Replay, Sweep, SweepEnded] {
            assert_eq!(command(view, &ctrl_c), Some(Command::Quit), "{view:?}");
            assert_eq!(command(view, &key(KeyCode::Char('q'))), Some(Command::Quit));
        }
        let space = key(KeyCode::Char(' '));
        assert_eq!(command(Live, &space), Some(Command::Pause));
        assert_eq!(
            command(Replay, &space),
            Some(Command::Timeline(Clock::PlayPause))
        );
        assert_eq!(command(Sweep, &space), None);
        assert_eq!(
            command(Live, &key(KeyCode::Char('c'))),
            Some(Command::Compare)
        );
        assert_eq!(
            command(Replay, &key(KeyCode::Char('3'))),
            Some(Command::Maximise(Some(2)))
        );
        assert_eq!(
            command(Live, &key(KeyCode::Esc)),
            Some(Command::Maximise(None))
        );
        assert_eq!(command(Replay, &key(KeyCode::Char('s'))), None);
        assert_eq!(
            command(SweepEnded, &key(KeyCode::Char(']'))),
            Some(Command::Axes(Axes::Held { down: false }))
        );
        assert_eq!(
            command(Replay, &key(KeyCode::Char(']'))),
            Some(Command::Timeline(Clock::Faster))
        );
    }

    /// The user guide's table between `<!-- keys: NAME …-->` and `<!-- /keys -->`.
    fn guide_table(name: &str) -> &'static str {
        let guide = include_str!("../../docs/live-view.md");
        let start = guide
            .find(&format!("<!-- keys: {name}"))
            .unwrap_or_else(|| panic!("docs/live-view.md has no '<!-- keys: {name}' table"));
        let table = &guide[start..];
        let table = &table[table.find('\n').map_or(table.len(), |i| i + 1)..];
        &table[..table.find("<!-- /keys -->").unwrap_or(table.len())]
    }

    #[test]
    fn the_guide_key_tables_are_the_key_map() {
        let tables = [
            ("live", markdown(of(Live))),
            ("replay", markdown(only_in(Replay, Live))),
            ("sweep", markdown(of(Sweep))),
        ];
        for (name, table) in tables {
            assert_eq!(
                guide_table(name),
                table,
                "docs/live-view.md's {name} keys differ from the key map, which reads:\n{table}"
            );
        }
    }

    #[test]
    fn every_binding_with_a_footer_word_applies_where_it_is_shown() {
        for b in BINDINGS {
            for (view, _) in b.footer {
                assert!(b.applies_in(*view), "{} in {view:?}", b.keys);
            }
        }
    }
}
