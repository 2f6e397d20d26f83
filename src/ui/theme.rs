//! Colour themes: the built-in ones embedded from `themes/*.toml`, or a user's
//! TOML file in the same format (documented at the top of each built-in file),
//! which the CLI reads and hands to [`parse`].
//!
//! The file's structure (which fields exist, which are required, their types)
//! is declared once, by the serde types `ThemeFile` and `Colors`. Every message
//! must name the dotted field and, where there is one, its line, so serde's
//! errors pass through `reword`: toml supplies the span and the key path, serde
//! the field names. Colours are checked as they are read, except the palette's
//! entries, whose messages name their index, which toml's key path leaves out.

use std::fmt;
use std::ops::Range;

use ratatui::style::Color;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use toml::Spanned;
use toml::de::DeTable;
use toml::value::Datetime;

/// Names accepted by [`builtin`], in the order a picker should list them.
pub const BUILTIN: [&str; 4] = ["dark", "light", "high-contrast", "colorblind"];

/// The theme used when the user names none.
pub const DEFAULT: &str = "dark";

/// Fewer colours than the four built-in implementations would make two of them
/// share a colour in every run that compares them all.
const MIN_IMPLEMENTATIONS: usize = 4;

pub const COLOR_HINT: &str = "use #rrggbb or a name such as blue, dark-gray, reset";

/// What the colour types tell serde they expect; [`reword`] adds [`COLOR_HINT`]
/// to type errors that name it.
const QUOTED_COLOR: &str = "a quoted colour";

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
    // Built from the parsed table, not the source, the deserializer's errors
    // carry no source text: only then does toml render their key path.
    let ThemeFile { name, colors } = ThemeFile::deserialize(toml::de::Deserializer::from(table))
        .map_err(|error| reword(&at, &error))?;
    if name.get_ref().trim().is_empty() {
        return Err(at.line(name.span(), "field name is empty; give the theme a name"));
    }
    let ColorsSection(colors) = colors;
    Ok(Theme {
        name: name.into_inner(),
        background: colors.background.0,
        foreground: colors.foreground.0,
        muted: colors.muted.0,
        border: colors.border.0,
        title: colors.title.0,
        highlight: colors.highlight.0,
        ok: colors.ok.0,
        warning: colors.warning.0,
        error: colors.error.0,
        implementations: palette(&at, colors.implementations)?,
    })
}

/// A theme file as written. With toml's `preserve_order` feature, tables are
/// read in file order, so `deny_unknown_fields` reports the first unknown key
/// in the file rather than the first in alphabetical order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Spanned<String>,
    colors: ColorsSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Colors {
    background: ColorValue,
    foreground: ColorValue,
    muted: ColorValue,
    border: ColorValue,
    title: ColorValue,
    highlight: ColorValue,
    ok: ColorValue,
    warning: ColorValue,
    error: ColorValue,
    implementations: Spanned<Palette>,
}

/// The `[colors]` table. Serde's derived visitor also accepts a list of values
/// in field order, which would report `[[colors]]` as a bad background colour.
struct ColorsSection(Colors);

impl<'de> Deserialize<'de> for ColorsSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ColorsSectionVisitor)
    }
}

struct ColorsSectionVisitor;

impl<'de> Visitor<'de> for ColorsSectionVisitor {
    type Value = ColorsSection;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [colors] section")
    }

    fn visit_map<A: MapAccess<'de>>(self, table: A) -> Result<ColorsSection, A::Error> {
        Colors::deserialize(MapAccessDeserializer::new(table)).map(ColorsSection)
    }
}

/// A colour field, checked as it is read; toml gives the error the field's span.
struct ColorValue(Color);

impl<'de> Deserialize<'de> for ColorValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ColorText(text) = ColorText::deserialize(deserializer)?;
        parse_color(&text)
            .map(ColorValue)
            .ok_or_else(|| de::Error::invalid_value(Unexpected::Str(&text), &QUOTED_COLOR))
    }
}

/// A colour as written, before it is checked: a type of its own so that a
/// value that is not a string is reported as "a quoted colour".
struct ColorText(String);

impl<'de> Deserialize<'de> for ColorText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ColorTextVisitor)
    }
}

struct ColorTextVisitor;

impl Visitor<'_> for ColorTextVisitor {
    type Value = ColorText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(QUOTED_COLOR)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<ColorText, E> {
        Ok(ColorText(text.to_owned()))
    }
}

/// `colors.implementations` as written; [`palette`] checks its entries.
struct Palette(Vec<Spanned<ColorText>>);

impl<'de> Deserialize<'de> for Palette {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(PaletteVisitor)
    }
}

struct PaletteVisitor;

impl<'de> Visitor<'de> for PaletteVisitor {
    type Value = Palette;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list such as [\"#rrggbb\", \"blue\", ...]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut entries: A) -> Result<Palette, A::Error> {
        let mut palette = Vec::new();
        while let Some(entry) = entries.next_element()? {
            palette.push(entry);
        }
        Ok(Palette(palette))
    }
}

/// Checks the entries after reading rather than as [`ColorValue`] does,
/// because their messages name the entry's index, which toml's key path lacks.
fn palette(at: &Locator<'_>, list: Spanned<Palette>) -> Result<Vec<Color>, ThemeError> {
    let span = list.span();
    let Palette(entries) = list.into_inner();
    let colors = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let ColorText(text) = entry.get_ref();
            parse_color(text).ok_or_else(|| {
                at.line(
                    entry.span(),
                    not_a_color(
                        &format!("colors.implementations[{index}]"),
                        &format!("{text:?}"),
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if colors.len() < MIN_IMPLEMENTATIONS {
        return Err(at.line(
            span,
            format!(
                "colors.implementations needs at least {MIN_IMPLEMENTATIONS} colours (got {}); add one per implementation",
                colors.len()
            ),
        ));
    }
    Ok(colors)
}

fn not_a_color(field: &str, quoted_text: &str) -> String {
    format!("{field} = {quoted_text} is not a colour ({COLOR_HINT})")
}

/// Turns serde's wording for an error in [`ThemeFile`] into golow's. Only a
/// key's name and a string's text come from the file, and serde writes each
/// before the parts that these types supply, so messages are split from the
/// right. A missing field gets no line: toml would give the whole table's.
fn reword(at: &Locator<'_>, error: &toml::de::Error) -> ThemeError {
    // The field in error for a type or value error; the enclosing table for
    // an unknown or missing field.
    let path = key_path(error);
    let field = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let message = error.message();
    if let Some(name) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        let field = field(name);
        return at.file(format!("field {field} is missing; {}", remedy(&field)));
    }
    let reworded = if let Some((name, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.rsplit_once("`, expected "))
    {
        // Serde lists the fields as "`a`", "`a` or `b`" or "one of `a`, `b`, `c`".
        let expected = expected
            .trim_start_matches("one of ")
            .replace(" or ", ", ")
            .replace('`', "");
        format!(
            "field {} is unknown (expected one of {expected})",
            field(name)
        )
    } else if let Some((got, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.rsplit_once(", expected "))
    {
        // A dotted path reads as a field on its own; a top-level name needs the word.
        let subject = if path.contains('.') {
            path.clone()
        } else {
            format!("field {path}")
        };
        let hint = if expected == QUOTED_COLOR {
            format!("; {COLOR_HINT}")
        } else {
            String::new()
        };
        let written = error.span().and_then(|span| at.source.get(span));
        format!(
            "{subject} must be {expected} (got {}{hint})",
            describe(got, written)
        )
    } else if let Some(quoted_text) = message
        .strip_prefix("invalid value: string ")
        .and_then(|rest| rest.strip_suffix(&format!(", expected {QUOTED_COLOR}")))
    {
        not_a_color(&path, quoted_text)
    } else if path.is_empty() {
        message.to_owned()
    } else {
        format!("field {path}: {message}")
    };
    at.line_or_file(error.span(), reworded)
}

/// The dotted keys from the top of the file to the error, empty at the top.
/// toml keeps them private and renders them only as a trailing "in `a.b`"
/// line of an error that carries no source text.
fn key_path(error: &toml::de::Error) -> String {
    error
        .to_string()
        .strip_prefix(error.message())
        .and_then(|rest| rest.strip_prefix("\nin `"))
        .and_then(|rest| rest.strip_suffix("`\n"))
        .unwrap_or_default()
        .to_owned()
}

fn remedy(field: &str) -> &'static str {
    match field {
        "name" => "add name = \"...\" at the top",
        "colors" => "add a [colors] section",
        "colors.implementations" => {
            "add implementations = [\"#rrggbb\", ...] to the [colors] section"
        }
        _ => "add it to the [colors] section",
    }
}

/// golow's words for serde's description of an unexpected value. toml hands
/// a date-time to serde as a map, so only the text `written` tells them apart.
fn describe<'a>(unexpected: &'a str, written: Option<&str>) -> &'a str {
    const WORDS: [(&str, &str); 6] = [
        ("string", "a string"),
        ("integer", "an integer"),
        ("floating point", "a float"),
        ("boolean", "a boolean"),
        ("sequence", "a list"),
        ("map", "a table"),
    ];
    if unexpected == "map" && written.is_some_and(|text| text.parse::<Datetime>().is_ok()) {
        return "a date-time";
    }
    WORDS
        .iter()
        .find(|(serde, _)| unexpected.starts_with(serde))
        .map_or(unexpected, |(_, golow)| golow)
}

/// Turns byte spans into the messages' `theme ORIGIN, line N: ...` prefix.
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

/// `#rrggbb` (either case) or one of the terminal's named colours (either case).
fn parse_color(text: &str) -> Option<Color> {
    if let Some(hex) = text.strip_prefix('#') {
        // The digit check also keeps the slicing below on char boundaries and
        // stops `from_str_radix` from accepting a sign.
        if hex.len() != 6 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return None;
        }
        let channel = |at: usize| u8::from_str_radix(&hex[at..at + 2], 16).ok();
        return Some(Color::Rgb(channel(0)?, channel(2)?, channel(4)?));
    }
    let color = match text.to_ascii_lowercase().as_str() {
        "reset" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" => Color::Gray,
        "dark-gray" => Color::DarkGray,
        "light-red" => Color::LightRed,
        "light-green" => Color::LightGreen,
        "light-yellow" => Color::LightYellow,
        "light-blue" => Color::LightBlue,
        "light-magenta" => Color::LightMagenta,
        "light-cyan" => Color::LightCyan,
        "white" => Color::White,
        _ => return None,
    };
    Some(color)
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
