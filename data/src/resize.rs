//! Bilinear resizing of planar images to the square training resolution.

use image::imageops::{self, FilterType};
use image::{ImageBuffer, Luma};

use super::DataError;

/// Reserves room for a whole split up front, so an absurd resolution ends in a
/// message rather than an allocation abort.
pub(super) fn image_buffer(
    kind: &str,
    count: usize,
    channels: u32,
    resolution: u32,
) -> Result<Vec<u8>, DataError> {
    let side = resolution as usize;
    let bytes = side
        .checked_mul(side)
        .and_then(|pixels| pixels.checked_mul(channels as usize))
        .and_then(|image| image.checked_mul(count));
    let mut buffer = Vec::new();
    match bytes {
        Some(bytes) if buffer.try_reserve_exact(bytes).is_ok() => Ok(buffer),
        _ => Err(DataError::new(format!(
            "{kind}: {count} images at {resolution}x{resolution} do not fit in memory; choose a smaller resolution"
        ))),
    }
}

/// Appends one image, given as channel planes of `width` x `height` row-major
/// pixels, resized to `resolution` x `resolution`. Each plane is resized on its
/// own, which for a separable filter equals resizing the interleaved image.
pub(super) fn append_square(
    out: &mut Vec<u8>,
    planes: &[u8],
    width: u32,
    height: u32,
    resolution: u32,
) -> Result<(), DataError> {
    if width == resolution && height == resolution {
        out.extend_from_slice(planes);
        return Ok(());
    }
    let plane_len = width as usize * height as usize;
    let mismatch = || {
        DataError::new(format!(
            "internal error: {} bytes is not a whole number of {width}x{height} planes",
            planes.len()
        ))
    };
    if plane_len == 0 || !planes.len().is_multiple_of(plane_len) {
        return Err(mismatch());
    }
    for plane in planes.chunks_exact(plane_len) {
        let image =
            ImageBuffer::<Luma<u8>, &[u8]>::from_raw(width, height, plane).ok_or_else(mismatch)?;
        let resized = imageops::resize(&image, resolution, resolution, FilterType::Triangle);
        out.extend_from_slice(resized.as_raw());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_size_is_copied_and_other_sizes_resized_per_plane() {
        let planes: Vec<u8> = (0..2 * 4 * 4).map(|v| v as u8 * 5).collect();
        let mut same = Vec::new();
        append_square(&mut same, &planes, 4, 4, 4).unwrap();
        assert_eq!(same, planes);

        let mut flat = Vec::new();
        append_square(&mut flat, &[10; 6 * 3], 6, 3, 5).unwrap();
        assert_eq!(flat, vec![10; 25]);

        let mut two = Vec::new();
        append_square(&mut two, &[[0; 9], [200; 9]].concat(), 3, 3, 2).unwrap();
        assert_eq!(two, [[0; 4], [200; 4]].concat());
    }

    #[test]
    fn bad_plane_sizes_are_errors() {
        assert!(append_square(&mut Vec::new(), &[0; 5], 2, 2, 3).is_err());
        assert!(append_square(&mut Vec::new(), &[], 0, 2, 3).is_err());
    }

    #[test]
    fn impossible_buffers_are_errors() {
        let err = image_buffer("x", usize::MAX, 3, 1 << 16).unwrap_err();
        assert!(err.to_string().contains("smaller resolution"), "{err}");
        assert!(image_buffer("x", 4, 3, 8).unwrap().capacity() >= 4 * 3 * 64);
    }
}
