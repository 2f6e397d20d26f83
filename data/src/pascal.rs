//! PASCAL VOC as single-label classification: each image takes the class of its first object.

use std::path::Path;

use image::ImageFormat;

use super::{DataError, Dataset, Split, files, resize};

const KIND: &str = "pascal";
const CLASSES: [&str; 20] = [
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
];

pub(super) fn load(dir: &Path, resolution: u32) -> Result<Dataset, DataError> {
    files::check_dir(KIND, dir)?;
    Ok(Dataset {
        name: KIND.to_string(),
        channels: 3,
        resolution,
        classes: CLASSES.len() as u32,
        train: split(dir, "train", resolution)?,
        test: split(dir, "val", resolution)?,
    })
}

fn split(dir: &Path, set: &str, resolution: u32) -> Result<Split, DataError> {
    let list_path = dir
        .join("ImageSets")
        .join("Main")
        .join(format!("{set}.txt"));
    let list = files::read_text(KIND, &list_path)?;
    let ids: Vec<&str> = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    if ids.is_empty() {
        return Err(DataError::file(
            KIND,
            &list_path,
            "lists no image ids; a split needs at least one",
        ));
    }
    let mut images = resize::image_buffer(KIND, ids.len(), 3, resolution)?;
    let mut labels = Vec::with_capacity(ids.len());
    for id in ids {
        labels.push(label(&dir.join("Annotations").join(format!("{id}.xml")))?);
        let planes = decode_rgb_planes(&dir.join("JPEGImages").join(format!("{id}.jpg")))?;
        resize::append_square(
            &mut images,
            &planes.pixels,
            planes.width,
            planes.height,
            resolution,
        )?;
    }
    Ok(Split { images, labels })
}

fn label(path: &Path) -> Result<i64, DataError> {
    let xml = files::read_text(KIND, path)?;
    let name = first_object_name(&xml).ok_or_else(|| {
        DataError::file(
            KIND,
            path,
            "no <object> with a <name>; is this a VOC annotation?",
        )
    })?;
    CLASSES
        .iter()
        .position(|class| *class == name)
        .map(|index| index as i64)
        .ok_or_else(|| {
            DataError::file(
                KIND,
                path,
                format!(
                    "unknown class '{name}'; expected one of the 20 VOC classes ({})",
                    CLASSES.join(" ")
                ),
            )
        })
}

/// The first `<name>` after the first `<object>`: parts nested in an object
/// carry their own names, but only after the object's.
fn first_object_name(xml: &str) -> Option<&str> {
    let mut rest = xml;
    let object = loop {
        let (_, after) = rest.split_once("<object")?;
        if after.starts_with(['>', ' ', '\t', '\r', '\n']) {
            break after;
        }
        rest = after;
    };
    let (_, after_open) = object.split_once("<name>")?;
    let (name, _) = after_open.split_once("</name>")?;
    Some(name.trim())
}

struct RgbPlanes {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

fn decode_rgb_planes(path: &Path) -> Result<RgbPlanes, DataError> {
    let bytes = files::read(KIND, path)?;
    let rgb = image::load_from_memory_with_format(&bytes, ImageFormat::Jpeg)
        .map_err(|err| {
            DataError::file(
                KIND,
                path,
                format!("cannot decode the JPEG ({err}); re-download the image"),
            )
        })?
        .to_rgb8();
    let plane = rgb.width() as usize * rgb.height() as usize;
    let mut pixels = vec![0; 3 * plane];
    let (red, rest) = pixels.split_at_mut(plane);
    let (green, blue) = rest.split_at_mut(plane);
    for (((pixel, r), g), b) in rgb.pixels().zip(red).zip(green).zip(blue) {
        let [pr, pg, pb] = pixel.0;
        (*r, *g, *b) = (pr, pg, pb);
    }
    Ok(RgbPlanes {
        width: rgb.width(),
        height: rgb.height(),
        pixels,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use image::{DynamicImage, RgbImage};

    use super::super::testutil::TempDir;
    use super::*;

    fn jpeg(width: u32, height: u32, colour: [u8; 3]) -> Vec<u8> {
        let mut bytes = Vec::new();
        DynamicImage::ImageRgb8(RgbImage::from_pixel(width, height, image::Rgb(colour)))
            .write_to(&mut Cursor::new(&mut bytes), ImageFormat::Jpeg)
            .unwrap();
        bytes
    }

    fn annotation(names: &[&str]) -> String {
        let objects: String = names
            .iter()
            .map(|name| {
                format!(
                    "<object>\n\t<name>{name}</name>\n\t<part><name>hand</name></part>\n</object>\n"
                )
            })
            .collect();
        format!(
            "<annotation>\n<filename>x.jpg</filename>\n<size><width>40</width></size>\n{objects}</annotation>\n"
        )
    }

    fn add(dir: &TempDir, id: &str, size: (u32, u32), colour: [u8; 3], names: &[&str]) {
        dir.write(
            &format!("JPEGImages/{id}.jpg"),
            &jpeg(size.0, size.1, colour),
        );
        dir.write(
            &format!("Annotations/{id}.xml"),
            annotation(names).as_bytes(),
        );
    }

    fn valid_dir() -> TempDir {
        let dir = TempDir::new();
        add(
            &dir,
            "2008_000001",
            (40, 30),
            [250, 0, 0],
            &["dog", "person"],
        );
        add(&dir, "2008_000002", (16, 16), [0, 0, 250], &["car"]);
        add(&dir, "2008_000003", (24, 50), [0, 250, 0], &["tvmonitor"]);
        dir.write("ImageSets/Main/train.txt", b"2008_000001\n2008_000002\n");
        dir.write("ImageSets/Main/val.txt", b"2008_000003\r\n\n");
        dir
    }

    fn load_err(dir: &TempDir) -> String {
        load(dir.path(), 16).unwrap_err().to_string()
    }

    #[test]
    fn loads_labels_and_resized_rgb_planes() {
        let dir = valid_dir();
        let ds = load(dir.path(), 16).unwrap();
        assert_eq!((ds.channels, ds.classes, ds.resolution), (3, 20, 16));
        assert_eq!(ds.train.labels, [11, 6]);
        assert_eq!(ds.test.labels, [19]);
        assert_eq!(ds.train.images.len(), 2 * 3 * 256);
        assert_eq!(ds.test.images.len(), 3 * 256);
        let mean =
            |plane: &[u8]| plane.iter().map(|&v| f64::from(v)).sum::<f64>() / plane.len() as f64;
        let planes: Vec<f64> = ds.train.images.chunks_exact(256).map(mean).collect();
        assert!(
            planes[0] > 200.0 && planes[1] < 50.0 && planes[2] < 50.0,
            "{planes:?}"
        );
        assert!(
            planes[3] < 50.0 && planes[4] < 50.0 && planes[5] > 200.0,
            "{planes:?}"
        );
    }

    #[test]
    fn finds_the_first_object_name() {
        assert_eq!(first_object_name(&annotation(&["cat", "dog"])), Some("cat"));
        let tricky = "<name>folder</name><objects><name>x</name></objects><object id=\"1\"><name> bus </name></object>";
        assert_eq!(first_object_name(tricky), Some("bus"));
        assert_eq!(first_object_name("<annotation></annotation>"), None);
    }

    #[test]
    fn unknown_class_names_the_annotation() {
        let dir = valid_dir();
        add(&dir, "2008_000002", (16, 16), [0, 0, 250], &["unicorn"]);
        let err = load_err(&dir);
        assert!(
            err.contains("2008_000002.xml: unknown class 'unicorn'"),
            "{err}"
        );
        dir.write("Annotations/2008_000002.xml", b"<annotation/>");
        let err = load_err(&dir);
        assert!(err.contains("2008_000002.xml: no <object>"), "{err}");
    }

    #[test]
    fn broken_or_missing_jpeg_names_the_file() {
        let dir = valid_dir();
        let path = dir.write("JPEGImages/2008_000003.jpg", &jpeg(24, 50, [1, 2, 3])[..40]);
        let err = load_err(&dir);
        assert!(
            err.starts_with(&format!("pascal: {}: cannot decode", path.display())),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
        let err = load_err(&dir);
        assert!(
            err.starts_with(&format!("pascal: {}: cannot read", path.display())),
            "{err}"
        );
    }

    #[test]
    fn empty_and_missing_inputs_are_rejected() {
        let dir = valid_dir();
        dir.write("ImageSets/Main/val.txt", b"\n");
        assert!(load_err(&dir).contains("val.txt: lists no image ids"));

        let missing = dir.path().join("nope");
        let err = load(&missing, 16).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("pascal: {}: cannot open", missing.display())),
            "{err}"
        );
    }
}
