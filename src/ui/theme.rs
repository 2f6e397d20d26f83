//! Colour themes: the built-in ones embedded from `themes/*.toml`, or a user's
//! TOML file in the same format (documented at the top of each built-in file),
//! which the CLI reads and hands to [`parse`].
//!
//! The file's structure is declared once, by `TOP_LEVEL` and `COLORS`, and
//! checked by walking toml's parsed table, whose keys and values carry their
//! spans, so that every message names the dotted field and, where there is
//! one, its line, in golow's words: only invalid TOML is reported in toml's.

use std::fmt;
use std::ops::Range;

use ratatui::style::Color;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Names accepted by [`builtin`], in the order a picker should list them.
pub const BUILTIN: [&str; 4] = ["dark", "light", "high-contrast", "colorblind"];

/// The theme used when the user names none.
pub const DEFAULT: &str = "dark";

/// Fewer colours than the four built-in implementations would make two of them
/// share a colour in every run that compares them all.
const MIN_IMPLEMENTATIONS: usize = 4;

pub const COLOR_HINT: &str = "use #rrggbb or a name such as blue, dark-gray, reset";

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub background: Color,
    pub foreground: Color,
    /// Secondary text and chart axes.
    pub muted: Color,
    pub border: Color,
    /// Pane titles.
    pub title: Color,
    /// Selection and the focused pane's border.
    pub highlight: Color,
    pub ok: Color,
    pub warning: Color,
    pub error: Color,
    /// The series palette: implementation slot `i` is drawn in colour `i`, in every pane.
    pub implementations: Vec<Color>,
}

impl Theme {
    /// The colour of implementation `slot`, cycling when there are more
    /// implementations than colours. A hand-built theme with an empty palette
    /// falls back to the foreground rather than panicking mid-draw.
    #[must_use]
    pub fn implementation_color(&self, slot: usize) -> Color {
        slot.checked_rem(self.implementations.len())
            .and_then(|index| self.implementations.get(index))
            .copied()
            .unwrap_or(self.foreground)
    }
}

/// Why a theme could not be loaded: one line naming the file, the line and the
/// field where there is one, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThemeError(String);

impl ThemeError {
    /// Origins, keys and OS messages come from outside; a control character in
    /// any of them would break the one-line promise that status bars rely on.
    pub fn one_line(message: String) -> Self {
        Self(message.replace(char::is_control, " "))
    }
}

impl fmt::Display for ThemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ThemeError {}

fn builtin_source(name: &str) -> Option<&'static str> {
    match name {
        "dark" => Some(include_str!("../../themes/dark.toml")),
        "light" => Some(include_str!("../../themes/light.toml")),
        "high-contrast" => Some(include_str!("../../themes/high-contrast.toml")),
        "colorblind" => Some(include_str!("../../themes/colorblind.toml")),
        _ => None,
    }
}

/// A built-in theme by name; `None` for any other name.
#[must_use]
pub fn builtin(name: &str) -> Option<Theme> {
    builtin_source(name).and_then(|source| parse(source, &format!("builtin:{name}")).ok())
}

/// A key of a theme file. Every key is required, and any other is an error.
struct Field {
    key: &'static str,
    shape: Shape,
    /// What a message about the key's absence tells the user to add.
    remedy: &'static str,
}

enum Shape {
    Name,
    Colors,
    /// Where in the theme the colour goes.
    Color(fn(&mut Theme) -> &mut Color),
    Palette,
}

const TOP_LEVEL: [Field; 2] = [
    Field {
        key: "name",
        shape: Shape::Name,
        remedy: "add name = \"...\" at the top",
    },
    Field {
        key: "colors",
        shape: Shape::Colors,
        remedy: "add a [colors] section",
    },
];

/// The `[colors]` section, in the order that messages list its keys.
const COLORS: [Field; 10] = [
    color("background", |theme| &mut theme.background),
    color("foreground", |theme| &mut theme.foreground),
    color("muted", |theme| &mut theme.muted),
    color("border", |theme| &mut theme.border),
    color("title", |theme| &mut theme.title),
    color("highlight", |theme| &mut theme.highlight),
    color("ok", |theme| &mut theme.ok),
    color("warning", |theme| &mut theme.warning),
    color("error", |theme| &mut theme.error),
    Field {
        key: "implementations",
        shape: Shape::Palette,
        remedy: "add implementations = [\"#rrggbb\", ...] to the [colors] section",
    },
];

const fn color(key: &'static str, slot: fn(&mut Theme) -> &mut Color) -> Field {
    Field {
        key,
        shape: Shape::Color(slot),
        remedy: "add it to the [colors] section",
    }
}

/// Parses a theme from TOML; `origin` (a path, or `builtin:NAME`) only labels messages.
///
/// # Errors
///
/// On invalid TOML, an unknown or missing field, a value of the wrong type, a
/// string that is not a colour, or fewer than four implementation colours.
pub fn parse(source: &str, origin: &str) -> Result<Theme, ThemeError> {
    let at = Locator { source, origin };
    let table = DeTable::parse(source).map_err(|error| {
        let message = error.message().lines().next().unwrap_or_default().trim();
        at.line_or_file(error.span(), format!("invalid TOML: {message}"))
    })?;
    // Every field is overwritten: `read_table` fails on any that is missing.
    let mut theme = Theme {
        name: String::new(),
        background: Color::Reset,
        foreground: Color::Reset,
        muted: Color::Reset,
        border: Color::Reset,
        title: Color::Reset,
        highlight: Color::Reset,
        ok: Color::Reset,
        warning: Color::Reset,
        error: Color::Reset,
        implementations: Vec::new(),
    };
    read_table(&at, "", table.get_ref(), &TOP_LEVEL, &mut theme)?;
    Ok(theme)
}

/// Reads `table` in file order (toml's `preserve_order` keeps it), so the
/// first problem in the file is the one reported. A missing field comes last
/// and gets no line: the only span there is would be the whole table's.
fn read_table(
    at: &Locator<'_>,
    path: &str,
    table: &DeTable<'_>,
    fields: &[Field],
    theme: &mut Theme,
) -> Result<(), ThemeError> {
    let dotted = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    for (key, value) in table {
        let Some(field) = fields.iter().find(|field| field.key == key.get_ref()) else {
            let expected: Vec<_> = fields.iter().map(|field| field.key).collect();
            return Err(at.line(
                key.span(),
                format!(
                    "field {} is unknown (expected one of {})",
                    dotted(key.get_ref()),
                    expected.join(", ")
                ),
            ));
        };
        read_value(at, &dotted(field.key), &field.shape, value, theme)?;
    }
    match fields
        .iter()
        .find(|field| !table.keys().any(|key| key.get_ref() == field.key))
    {
        Some(missing) => Err(at.file(format!(
            "field {} is missing; {}",
            dotted(missing.key),
            missing.remedy
        ))),
        None => Ok(()),
    }
}

fn read_value(
    at: &Locator<'_>,
    field: &str,
    shape: &Shape,
    value: &Spanned<DeValue<'_>>,
    theme: &mut Theme,
) -> Result<(), ThemeError> {
    match shape {
        Shape::Name => {
            let Some(name) = value.get_ref().as_str() else {
                return Err(wrong_type(at, field, "a string", value));
            };
            if name.trim().is_empty() {
                return Err(at.line(
                    value.span(),
                    format!("field {field} is empty; give the theme a name"),
                ));
            }
            name.clone_into(&mut theme.name);
        }
        Shape::Colors => {
            let Some(colors) = value.get_ref().as_table() else {
                return Err(wrong_type(at, field, "a [colors] section", value));
            };
            read_table(at, field, colors, &COLORS, theme)?;
        }
        Shape::Color(slot) => *slot(theme) = read_color(at, field, value)?,
        Shape::Palette => theme.implementations = read_palette(at, field, value)?,
    }
    Ok(())
}

fn read_color(
    at: &Locator<'_>,
    field: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Color, ThemeError> {
    let Some(text) = value.get_ref().as_str() else {
        return Err(at.line(
            value.span(),
            format!(
                "{field} must be a quoted colour (got {}; {COLOR_HINT})",
                kind(value.get_ref())
            ),
        ));
    };
    parse_color(text).ok_or_else(|| {
        at.line(
            value.span(),
            format!("{field} = {text:?} is not a colour ({COLOR_HINT})"),
        )
    })
}

fn read_palette(
    at: &Locator<'_>,
    field: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<Color>, ThemeError> {
    let Some(entries) = value.get_ref().as_array() else {
        return Err(wrong_type(
            at,
            field,
            "a list such as [\"#rrggbb\", \"blue\", ...]",
            value,
        ));
    };
    let colors = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| read_color(at, &format!("{field}[{index}]"), entry))
        .collect::<Result<Vec<_>, _>>()?;
    if colors.len() < MIN_IMPLEMENTATIONS {
        return Err(at.line(
            value.span(),
            format!(
                "{field} needs at least {MIN_IMPLEMENTATIONS} colours (got {}); add one per implementation",
                colors.len()
            ),
        ));
    }
    Ok(colors)
}

fn wrong_type(
    at: &Locator<'_>,
    field: &str,
    expected: &str,
    value: &Spanned<DeValue<'_>>,
) -> ThemeError {
    // A dotted path reads as a field on its own; a top-level name needs the word.
    let subject = if field.contains('.') {
        field.to_owned()
    } else {
        format!("field {field}")
    };
    at.line(
        value.span(),
        format!(
            "{subject} must be {expected} (got {})",
            kind(value.get_ref())
        ),
    )
}

fn kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

/// FoldOrder byte spans into the messages' `theme ORIGIN, line N: ...` prefix.
struct Locator<'a> {
    source: &'a str,
    origin: &'a str,
}

impl Locator<'_> {
    fn line(&self, span: Range<usize>, message: impl fmt::Display) -> ThemeError {
        let end = span.start.min(self.source.len());
        let newlines = self.source.as_bytes()[..end]
            .iter()
            .filter(|&&byte| byte == b'\n')
            .count();
        ThemeError::one_line(format!(
            "theme {}, line {}: {message}",
            self.origin,
            newlines + 1
        ))
    }

    fn file(&self, message: impl fmt::Display) -> ThemeError {
        ThemeError::one_line(format!("theme {}: {message}", self.origin))
    }

    fn line_or_file(&self, span: Option<Range<usize>>, message: impl fmt::Display) -> ThemeError {
        match span {
            Some(span) => self.line(span, message),
            None => self.file(message),
        }
    }
}

/// `#rrggbb` or one of the terminal's named colours, in either case: the
/// spellings the theme files document, which are ratatui's own as it writes
/// them, with a hyphen between words. Its parser also takes other spellings
/// (spaces, "grey", "bright", signed hex digits) and colour indexes; golow
/// refuses those, so that a theme file has one way to say each colour.
fn parse_color(text: &str) -> Option<Color> {
    let color: Color = text.parse().ok()?;
    let spelling: String = match color {
        Color::Indexed(_) => return None,
        Color::Rgb(..) => color.to_string(),
        named => named
            .to_string()
            .char_indices()
            .flat_map(|(at, letter)| {
                let word = at > 0 && letter.is_ascii_uppercase();
                word.then_some('-').into_iter().chain([letter])
            })
            .collect(),
    };
    text.eq_ignore_ascii_case(&spelling).then_some(color)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A valid theme whose line numbers the error tests below rely on.
    pub(crate) const VALID: &str = "\
name = \"sample\"

[colors]
background = \"#101820\"
foreground = \"white\"
muted = \"dark-gray\"
border = \"gray\"
title = \"light-cyan\"
highlight = \"Yellow\"
ok = \"green\"
warning = \"light-yellow\"
error = \"red\"
implementations = [\"#FF8000\", \"blue\", \"reset\", \"magenta\"]
";

    /// `VALID` with line `line` (1-based) replaced; an empty replacement keeps
    /// the line as a blank so the other lines keep their numbers.
    pub(crate) fn edited(line: usize, replacement: &str) -> String {
        VALID
            .lines()
            .enumerate()
            .map(|(index, text)| if index + 1 == line { replacement } else { text })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn error_of(source: &str) -> String {
        parse(source, "/x/t.toml")
            .expect_err("the source should be rejected")
            .to_string()
    }

    fn relative_luminance(color: Color) -> f64 {
        let Color::Rgb(r, g, b) = color else {
            panic!(
                "built-in themes use #rrggbb so that they look the same in every terminal, got {color:?}"
            );
        };
        let linear = |channel: u8| {
            let c = f64::from(channel) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
    }

    fn contrast(a: Color, b: Color) -> f64 {
        let (a, b) = (relative_luminance(a), relative_luminance(b));
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    #[test]
    fn every_builtin_parses_with_its_own_name_and_distinct_series_colours() {
        for name in BUILTIN {
            let theme = builtin(name).unwrap_or_else(|| panic!("built-in {name} does not parse"));
            assert_eq!(theme.name, name, "name field of themes/{name}.toml");
            let distinct: HashSet<Color> = theme.implementations.iter().copied().collect();
            assert!(distinct.len() >= 4, "{name}: {distinct:?}");
            assert_eq!(
                distinct.len(),
                theme.implementations.len(),
                "{name} repeats a colour"
            );
        }
        assert!(BUILTIN.contains(&DEFAULT));
        assert_eq!(builtin("nosuch"), None);
    }

    #[test]
    fn builtin_errors_name_the_embedded_origin() {
        let source = builtin_source("dark").expect("dark is embedded");
        let broken = source.replace("name = \"dark\"", "name = 1");
        assert!(
            parse(&broken, "builtin:dark")
                .expect_err("name must be a string")
                .to_string()
                .starts_with("theme builtin:dark, line ")
        );
    }

    #[test]
    fn builtin_colours_are_readable_on_their_background() {
        for name in BUILTIN {
            let theme = builtin(name).expect("built-ins parse");
            let on_background = |color: Color| contrast(color, theme.background);
            assert!(on_background(theme.foreground) >= 7.0, "{name} foreground");
            let text = [
                theme.muted,
                theme.title,
                theme.highlight,
                theme.ok,
                theme.warning,
                theme.error,
            ];
            for color in text
                .into_iter()
                .chain(theme.implementations.iter().copied())
            {
                assert!(on_background(color) >= 3.0, "{name}: {color:?}");
            }
        }
    }

    #[test]
    fn colorblind_uses_okabe_ito_and_no_red_green_status_pair() {
        let theme = builtin("colorblind").expect("built-ins parse");
        let okabe_ito = [
            0xE69F00, 0x56B4E9, 0x009E73, 0xF0E442, 0x0072B2, 0xD55E00, 0xCC79A7,
        ]
        .map(Color::from_u32);
        assert_eq!(theme.implementations, okabe_ito);
        assert_eq!(theme.ok, Color::from_u32(0x0072B2));
        assert_eq!(theme.warning, Color::from_u32(0xE69F00));
        assert_eq!(theme.error, Color::from_u32(0xD55E00));
    }

    #[test]
    fn high_contrast_is_white_on_pure_black() {
        let theme = builtin("high-contrast").expect("built-ins parse");
        assert_eq!(theme.background, Color::Rgb(0, 0, 0));
        assert_eq!(theme.foreground, Color::Rgb(255, 255, 255));
        assert_eq!(theme.border, Color::Rgb(255, 255, 255));
    }

    #[test]
    fn hex_colours_parse_in_either_case() {
        assert_eq!(parse_color("#1e1e2e"), Some(Color::Rgb(0x1e, 0x1e, 0x2e)));
        assert_eq!(parse_color("#FFaa00"), Some(Color::Rgb(0xff, 0xaa, 0x00)));
        assert_eq!(parse_color("#000000"), Some(Color::Rgb(0, 0, 0)));
    }

    #[test]
    fn named_colours_parse_in_either_case() {
        let named = [
            ("black", Color::Black),
            ("red", Color::Red),
            ("green", Color::Green),
            ("yellow", Color::Yellow),
            ("blue", Color::Blue),
            ("magenta", Color::Magenta),
            ("cyan", Color::Cyan),
            ("gray", Color::Gray),
            ("dark-gray", Color::DarkGray),
            ("light-red", Color::LightRed),
            ("light-green", Color::LightGreen),
            ("light-yellow", Color::LightYellow),
            ("light-blue", Color::LightBlue),
            ("light-magenta", Color::LightMagenta),
            ("light-cyan", Color::LightCyan),
            ("white", Color::White),
            ("reset", Color::Reset),
        ];
        for (name, color) in named {
            assert_eq!(parse_color(name), Some(color), "{name}");
            assert_eq!(parse_color(&name.to_uppercase()), Some(color), "{name}");
        }
    }

    #[test]
    fn malformed_colours_are_rejected() {
        for text in [
            "",
            "#",
            "#12345",
            "#1234567",
            "#gggggg",
            "#+1+2+3",
            "#ééé",
            "1e1e2e",
            "blu",
            "darkgray",
            " blue",
            "dark gray",
        ] {
            assert_eq!(parse_color(text), None, "{text:?}");
        }
    }

    #[test]
    fn sample_parses_to_every_field() {
        let expected = Theme {
            name: "sample".to_owned(),
            background: Color::Rgb(0x10, 0x18, 0x20),
            foreground: Color::White,
            muted: Color::DarkGray,
            border: Color::Gray,
            title: Color::LightCyan,
            highlight: Color::Yellow,
            ok: Color::Green,
            warning: Color::LightYellow,
            error: Color::Red,
            implementations: vec![
                Color::Rgb(0xff, 0x80, 0x00),
                Color::Blue,
                Color::Reset,
                Color::Magenta,
            ],
        };
        assert_eq!(parse(VALID, "/x/t.toml"), Ok(expected));
    }

    #[test]
    fn implementation_colours_cycle_through_the_palette() {
        let theme = parse(VALID, "/x/t.toml").expect("valid");
        assert_eq!(theme.implementation_color(0), Color::Rgb(0xff, 0x80, 0x00));
        assert_eq!(theme.implementation_color(3), Color::Magenta);
        assert_eq!(theme.implementation_color(4), Color::Rgb(0xff, 0x80, 0x00));
        assert_eq!(theme.implementation_color(9), Color::Blue);
        let empty = Theme {
            implementations: Vec::new(),
            ..theme
        };
        assert_eq!(empty.implementation_color(2), empty.foreground);
    }

    #[test]
    fn unknown_colour_field_is_named_with_its_line() {
        assert_eq!(
            error_of(&edited(7, "border = \"gray\"\naccent = \"blue\"")),
            "theme /x/t.toml, line 8: field colors.accent is unknown (expected one of background, foreground, muted, border, title, highlight, ok, warning, error, implementations)"
        );
    }

    #[test]
    fn misspelt_field_is_reported_as_unknown_not_missing() {
        assert_eq!(
            error_of(&edited(5, "forground = \"white\"")),
            "theme /x/t.toml, line 5: field colors.forground is unknown (expected one of background, foreground, muted, border, title, highlight, ok, warning, error, implementations)"
        );
    }

    #[test]
    fn unknown_top_level_field_is_named_with_its_line() {
        assert_eq!(
            error_of(&edited(2, "version = 2")),
            "theme /x/t.toml, line 2: field version is unknown (expected one of name, colors)"
        );
    }

    #[test]
    fn first_unknown_field_in_file_order_is_reported() {
        assert_eq!(
            error_of(&edited(12, "error = \"red\"\nzzz = 1\naaa = 2")),
            "theme /x/t.toml, line 13: field colors.zzz is unknown (expected one of background, foreground, muted, border, title, highlight, ok, warning, error, implementations)"
        );
    }

    #[test]
    fn invalid_colour_is_named_with_its_line() {
        assert_eq!(
            error_of(&edited(6, "muted = \"blu\"")),
            format!(
                "theme /x/t.toml, line 6: colors.muted = \"blu\" is not a colour ({COLOR_HINT})"
            )
        );
    }

    #[test]
    fn non_string_colour_is_named_with_its_line() {
        assert_eq!(
            error_of(&edited(10, "ok = 3")),
            format!(
                "theme /x/t.toml, line 10: colors.ok must be a quoted colour (got an integer; {COLOR_HINT})"
            )
        );
    }

    #[test]
    fn missing_colour_field_is_named() {
        assert_eq!(
            error_of(&edited(12, "")),
            "theme /x/t.toml: field colors.error is missing; add it to the [colors] section"
        );
    }

    #[test]
    fn missing_name_and_missing_colors_are_named() {
        assert_eq!(
            error_of(&edited(1, "")),
            "theme /x/t.toml: field name is missing; add name = \"...\" at the top"
        );
        let no_colors = VALID.lines().take(2).collect::<Vec<_>>().join("\n");
        assert_eq!(
            error_of(&no_colors),
            "theme /x/t.toml: field colors is missing; add a [colors] section"
        );
    }

    #[test]
    fn bad_name_is_named_with_its_line() {
        assert_eq!(
            error_of(&edited(1, "name = 3")),
            "theme /x/t.toml, line 1: field name must be a string (got an integer)"
        );
        assert_eq!(
            error_of(&edited(1, "name = \" \"")),
            "theme /x/t.toml, line 1: field name is empty; give the theme a name"
        );
    }

    #[test]
    fn invalid_toml_reports_its_line() {
        let message = error_of(&edited(6, "muted = \"dark-gray"));
        assert!(
            message.starts_with("theme /x/t.toml, line 6: invalid TOML: "),
            "{message}"
        );
        let message = error_of(&edited(9, "highlight = \"yellow\"\nok = \"green\""));
        assert!(
            message.starts_with("theme /x/t.toml, line 11: invalid TOML: "),
            "{message}"
        );
        let message = error_of(&edited(6, "muted = \"gray\"\nmuted = \"gray\""));
        assert!(
            message.starts_with("theme /x/t.toml, line 7: invalid TOML: duplicate key"),
            "{message}"
        );
        let message = error_of("[1, 2]\n");
        assert!(
            message.starts_with("theme /x/t.toml, line 1: invalid TOML: "),
            "{message}"
        );
    }

    #[test]
    fn too_few_implementations_are_reported_at_the_list() {
        assert_eq!(
            error_of(&edited(
                13,
                "implementations = [\n  \"red\",\n  \"blue\",\n]"
            )),
            "theme /x/t.toml, line 13: colors.implementations needs at least 4 colours (got 2); add one per implementation"
        );
    }

    #[test]
    fn bad_implementation_colour_is_reported_at_its_own_line() {
        assert_eq!(
            error_of(&edited(
                13,
                "implementations = [\n  \"red\",\n  \"bleu\",\n  \"green\",\n  \"cyan\",\n]"
            )),
            format!(
                "theme /x/t.toml, line 15: colors.implementations[1] = \"bleu\" is not a colour ({COLOR_HINT})"
            )
        );
    }

    #[test]
    fn implementations_must_be_a_list() {
        assert_eq!(
            error_of(&edited(13, "implementations = \"red\"")),
            "theme /x/t.toml, line 13: colors.implementations must be a list such as [\"#rrggbb\", \"blue\", ...] (got a string)"
        );
    }

    #[test]
    fn colors_must_be_a_table() {
        assert_eq!(
            error_of(&edited(3, "[[colors]]")),
            "theme /x/t.toml, line 3: field colors must be a [colors] section (got a list)"
        );
    }

    #[test]
    fn garbage_is_rejected_on_one_line_without_panicking() {
        let mut samples = vec![
            String::new(),
            "[1, 2]".to_owned(),
            "[[x]]".to_owned(),
            "= =".to_owned(),
            "\u{feff}".to_owned(),
            format!("x = {}", "[".repeat(100_000)),
            format!("x = {}", "{a = ".repeat(100_000)),
            format!("[{}a]\n", "a.".repeat(50_000)),
            format!("{}a = 1\n", "a.".repeat(50_000)),
            edited(4, "background = \"\\n\""),
            edited(4, "\"back\\nground\" = \"red\""),
        ];
        // A fixed xorshift keeps the corpus reproducible without a rand dependency.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"[]{}=\"'#.,\n abcdefgimnorstu0123456789-_\\\t\r";
        for _ in 0..2_000 {
            let length = usize::try_from(next() % 120).expect("fits");
            let raw: Vec<u8> = (0..length).map(|_| next().to_le_bytes()[0]).collect();
            samples.push(String::from_utf8_lossy(&raw).into_owned());
            let tomlish: String = (0..length)
                .map(|_| {
                    let pick = usize::try_from(next() % alphabet.len() as u64).expect("fits");
                    char::from(alphabet[pick])
                })
                .collect();
            samples.push(tomlish);
        }
        for name in BUILTIN {
            let source = builtin_source(name).expect("embedded");
            samples.extend(
                source
                    .char_indices()
                    .map(|(end, _)| source[..end].to_owned()),
            );
        }
        for sample in &samples {
            if let Err(error) = parse(sample, "fuzz\nname") {
                let message = error.to_string();
                assert!(message.starts_with("theme fuzz name"), "{message}");
                assert!(!message.contains(char::is_control), "{message:?}");
            }
        }
        assert!(parse("", "empty").is_err());
    }
}
