//! Parsing of the `KIND[:DIR]` strings users pass on the command line.

use std::fmt;
use std::path::PathBuf;

use super::DataError;

const KNOWN: &str = "synthetic, mnist:DIR, cifar10:DIR, stl10:DIR, pascal:DIR";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetSpec {
    Synthetic,
    Mnist(PathBuf),
    Cifar10(PathBuf),
    Stl10(PathBuf),
    Pascal(PathBuf),
}

impl DatasetSpec {
    pub fn parse(s: &str) -> Result<DatasetSpec, DataError> {
        let (kind, dir) = match s.split_once(':') {
            Some((kind, dir)) => (kind, Some(dir)),
            None => (s, None),
        };
        let with_dir: fn(PathBuf) -> DatasetSpec = match kind {
            "synthetic" if dir.is_none() => return Ok(DatasetSpec::Synthetic),
            "synthetic" => {
                return Err(DataError::new(
                    "dataset 'synthetic' is built in and takes no directory; write just 'synthetic'",
                ));
            }
            "mnist" => DatasetSpec::Mnist,
            "cifar10" => DatasetSpec::Cifar10,
            "stl10" => DatasetSpec::Stl10,
            "pascal" => DatasetSpec::Pascal,
            _ => {
                return Err(DataError::new(format!(
                    "unknown dataset '{kind}'; known datasets: {KNOWN}"
                )));
            }
        };
        match dir {
            Some(dir) if !dir.is_empty() => Ok(with_dir(PathBuf::from(dir))),
            _ => Err(DataError::new(format!(
                "dataset '{kind}' needs the directory holding its files; write {kind}:DIR"
            ))),
        }
    }

    pub fn default_resolution(&self) -> u32 {
        match self {
            DatasetSpec::Synthetic | DatasetSpec::Cifar10(_) => 32,
            DatasetSpec::Mnist(_) => 28,
            DatasetSpec::Stl10(_) => 96,
            DatasetSpec::Pascal(_) => 224,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            DatasetSpec::Synthetic => "synthetic",
            DatasetSpec::Mnist(_) => "mnist",
            DatasetSpec::Cifar10(_) => "cifar10",
            DatasetSpec::Stl10(_) => "stl10",
            DatasetSpec::Pascal(_) => "pascal",
        }
    }
}

impl fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetSpec::Synthetic => f.write_str(self.name()),
            DatasetSpec::Mnist(dir)
            | DatasetSpec::Cifar10(dir)
            | DatasetSpec::Stl10(dir)
            | DatasetSpec::Pascal(dir) => write!(f, "{}:{}", self.name(), dir.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_round_trips() {
        let cases = [
            ("synthetic", DatasetSpec::Synthetic, 32),
            ("mnist:/d/m", DatasetSpec::Mnist("/d/m".into()), 28),
            ("cifar10:rel/c", DatasetSpec::Cifar10("rel/c".into()), 32),
            ("stl10:/s", DatasetSpec::Stl10("/s".into()), 96),
            ("pascal:/v:x", DatasetSpec::Pascal("/v:x".into()), 224),
        ];
        for (text, spec, resolution) in cases {
            let parsed = DatasetSpec::parse(text).unwrap();
            assert_eq!(parsed, spec);
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.default_resolution(), resolution);
            assert!(text.starts_with(parsed.name()));
        }
    }

    #[test]
    fn unknown_kind_lists_the_known_ones() {
        let err = DatasetSpec::parse("imagenet:/d").unwrap_err().to_string();
        assert!(err.contains("'imagenet'"), "{err}");
        assert!(err.contains(KNOWN), "{err}");
    }

    #[test]
    fn missing_or_extra_directory_is_rejected() {
        for text in ["mnist", "mnist:", "pascal:"] {
            let err = DatasetSpec::parse(text).unwrap_err().to_string();
            assert!(err.contains(":DIR"), "{err}");
        }
        let err = DatasetSpec::parse("synthetic:/d").unwrap_err().to_string();
        assert!(err.contains("takes no directory"), "{err}");
    }
}
