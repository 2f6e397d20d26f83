//! Text bound for the terminal that came from outside (worker lines, names and messages in recordings, paths, and
//! the parser's own messages, which quote what a worker sent): its control characters are shown as escapes, never
//! sent raw, so that nothing golow prints can move the cursor, clear the screen, retitle the window or write the
//! clipboard (OSC 52). The TUI needs none of this: ratatui's buffer drops control characters.

use std::borrow::Cow;

/// `text` with every control character but the line break shown as its escape (`\u{1b}`).
pub fn printable(text: &str) -> Cow<'_, str> {
    let raw = |c: char| c.is_control() && c != '\n';
    if !text.chars().any(raw) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if raw(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
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
            printable("\u{1b}]0;pwned\u{7}\u{1b}[2J\tx\u{9b}y\n"),
            "\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\tx\\u{9b}y\n"
        );
    }
}
