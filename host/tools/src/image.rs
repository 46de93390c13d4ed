//! Images for the read tool and `@file` prompts, as pi attaches them: which files are images
//! (the `file-type` sniff of the first 4100 bytes, restricted to png, jpeg, gif and webp; pi
//! 1.6.0's own sniff of them and bmp, which it converts to PNG), kept as they are when they
//! fit 2000x2000 and 4.5 MiB of base64, else brought under those limits as pi's `resizeImage`
//! does (decoded with the `image` crate where pi uses Photon: the sizes, notes and choices are
//! pi's, the encoded bytes are this encoder's).

/// Bytes pi sniffs (utils/mime.js).
pub(crate) const SNIFF_BYTES: usize = 4100;
/// pi's resize limits (utils/image-resize.js).
pub(crate) const MAX_WIDTH: u32 = 2000;
pub(crate) const MAX_HEIGHT: u32 = 2000;
pub(crate) const MAX_BASE64_BYTES: usize = 4_718_592; // 4.5 MiB
/// pi's JPEG qualities, tried in this order once PNG and the first are too large.
const JPEG_QUALITIES: [u8; 5] = [80, 85, 70, 55, 40];

/// pi's note for an image it could not bring under its inline limits.
const OMITTED_IMAGE_NOTE: &str =
    "[Image omitted: could not be resized below the inline image size limit.]";
/// pi 1.6.0's note for an image it could not convert (a BMP that does not decode).
const UNCONVERTED_IMAGE_NOTE: &str =
    "[Image omitted: could not be converted to a supported inline image format.]";

/// An image file as pi attaches it inline (the read tool, `@file` prompts).
#[derive(Debug, Clone, PartialEq)]
pub struct InlineImage {
    /// The type sent: the file's, or the one it was converted or re-encoded to.
    pub mime: &'static str,
    /// Base64 of what is sent, or `None` when pi would omit it (then `omitted` says why).
    pub data: Option<String>,
    /// pi's notes on what was done to it (`[Image: original WxH, displayed at ...]`).
    pub hints: Vec<String>,
    /// pi's note for an image that is not sent.
    pub omitted: &'static str,
}

/// The image `bytes` hold as the session's pi release tells and processes images, or `None`
/// (text).
pub fn inline_image(bytes: &[u8], pi: pichamber_pi::PiVersion) -> Option<InlineImage> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let sniffed = if pi.is_1_6() {
        sniff_mime_1_6(head)
    } else {
        sniff_mime(head)
    }?;
    let omitted = |note| InlineImage {
        mime: sniffed,
        data: None,
        hints: Vec::new(),
        omitted: note,
    };
    // pi 1.6.0 converts what the model cannot take (BMP) to PNG first.
    let converted;
    let (bytes, mime) = if sniffed == "image/bmp" {
        match decode(bytes, sniffed).and_then(|(image, _)| encode_png(&image)) {
            Some(png) => {
                converted = png;
                (converted.as_slice(), "image/png")
            }
            None => return Some(omitted(UNCONVERTED_IMAGE_NOTE)),
        }
    } else {
        (bytes, sniffed)
    };
    let data = base64(bytes);
    let fits = dimensions(bytes, mime)
        .is_some_and(|(w, h)| w <= MAX_WIDTH && h <= MAX_HEIGHT && data.len() < MAX_BASE64_BYTES);
    let (data, mime, dimension_note) = if fits {
        (data, mime, None)
    } else {
        match resize_image(bytes, mime, &ResizeLimits::default(), pi) {
            Some(r) => {
                let note = r.was_resized.then(|| r.dimension_note());
                // A re-encoded image is a PNG or a JPEG.
                let sent = match r.mime.as_str() {
                    _ if !r.was_resized => mime,
                    "image/jpeg" => "image/jpeg",
                    _ => "image/png",
                };
                (r.data, sent, note)
            }
            None => return Some(omitted(OMITTED_IMAGE_NOTE)),
        }
    };
    let mut hints = Vec::new();
    if sniffed != mime && sniffed == "image/bmp" {
        hints.push(format!("[Image converted from {sniffed} to {mime}.]"));
    }
    hints.extend(dimension_note);
    Some(InlineImage {
        mime,
        data: Some(data),
        hints,
        omitted: OMITTED_IMAGE_NOTE,
    })
}

/// pi's `ImageResizeOptions`: the box an image must fit and the base64 it may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResizeLimits {
    pub max_width: u32,
    pub max_height: u32,
    pub max_bytes: usize,
    pub jpeg_quality: u8,
}

impl Default for ResizeLimits {
    /// pi's defaults.
    fn default() -> Self {
        ResizeLimits {
            max_width: MAX_WIDTH,
            max_height: MAX_HEIGHT,
            max_bytes: MAX_BASE64_BYTES,
            jpeg_quality: JPEG_QUALITIES[0],
        }
    }
}

/// An image within limits, as pi's `resizeImage` gives it (`ResizedImage`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResizedImage {
    /// Base64.
    pub data: String,
    pub mime: String,
    pub original: (u32, u32),
    pub size: (u32, u32),
    pub was_resized: bool,
}

impl ResizedImage {
    /// pi's `formatDimensionNote`.
    fn dimension_note(&self) -> String {
        let ((ow, oh), (w, h)) = (self.original, self.size);
        format!(
            "[Image: original {ow}x{oh}, displayed at {w}x{h}. Multiply coordinates by {:.2} to map to original image.]",
            f64::from(ow) / f64::from(w)
        )
    }
}

/// What a decode may take: an image past these is refused before its pixels are allocated
/// (a hostile file or extension must not make the host allocate gigabytes).
const MAX_DECODED_SIDE: u32 = 16_384;
const MAX_DECODE_ALLOC: u64 = 256 << 20;

/// The decoded image, its EXIF orientation applied as pi applies it; its format is told by
/// its bytes (Photon's way), `mime` only when they say nothing.
fn decode(bytes: &[u8], mime: &str) -> Option<(image::DynamicImage, (u32, u32))> {
    use image::ImageDecoder as _;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()?;
    if reader.format().is_none() {
        reader.set_format(image::ImageFormat::from_mime_type(mime)?);
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DECODED_SIDE);
    limits.max_image_height = Some(MAX_DECODED_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().ok()?;
    let orientation = decoder.orientation().ok();
    let mut image = image::DynamicImage::from_decoder(decoder).ok()?;
    if let Some(orientation) = orientation {
        image.apply_orientation(orientation);
    }
    let size = (image.width(), image.height());
    Some((image, size))
}

/// pi's `resizeImage`: the image as it is when it fits `limits`; else scaled into them with
/// Lanczos3, then the first encoding under the byte limit as pi picks it (pi 1.6.0: the
/// smaller of PNG and JPEG at the first quality, then lower JPEG qualities; 0.73.1: PNG, then
/// JPEG from the first quality down), shrinking by a quarter until one fits. `None`: it does
/// not decode, or nothing fits (pi's answer too).
pub fn resize_image(
    bytes: &[u8],
    mime: &str,
    limits: &ResizeLimits,
    pi: pichamber_pi::PiVersion,
) -> Option<ResizedImage> {
    let (image, original) = decode(bytes, mime)?;
    let base64_size = bytes.len().div_ceil(3) * 4;
    let (mut width, mut height) = original;
    if width <= limits.max_width && height <= limits.max_height && base64_size < limits.max_bytes {
        let mime = if mime.is_empty() {
            format!("image/{}", image_format_name(bytes))
        } else {
            mime.to_owned()
        };
        return Some(ResizedImage {
            data: base64(bytes),
            mime,
            original,
            size: original,
            was_resized: false,
        });
    }
    let scale = |n: u32, by: u32, of: u32| (f64::from(n) * f64::from(by) / f64::from(of)).round();
    if width > limits.max_width {
        height = scale(height, limits.max_width, width) as u32;
        width = limits.max_width;
    }
    if height > limits.max_height {
        width = scale(width, limits.max_height, height) as u32;
        height = limits.max_height;
    }
    let (mut width, mut height) = (width.max(1), height.max(1));
    // pi's qualities: the asked one, then its fixed steps, each once.
    let mut qualities = vec![limits.jpeg_quality.clamp(1, 100)];
    for q in &JPEG_QUALITIES[1..] {
        if !qualities.contains(q) {
            qualities.push(*q);
        }
    }
    loop {
        let scaled = image.resize_exact(width, height, image::imageops::FilterType::Lanczos3);
        let png = encode_png(&scaled).map(|b| (base64(&b), "image/png"));
        let mut jpegs = qualities
            .iter()
            .filter_map(|q| encode_jpeg(&scaled, *q).map(|b| (base64(&b), "image/jpeg")));
        let first_jpeg = jpegs.next();
        let mut candidates = Vec::new();
        match (png, first_jpeg) {
            (Some(png), Some(jpeg)) if pi.is_1_6() && jpeg.0.len() < png.0.len() => {
                candidates.extend([jpeg, png]);
            }
            (png, jpeg) => candidates.extend(png.into_iter().chain(jpeg)),
        }
        candidates.extend(jpegs);
        if let Some((data, mime)) = candidates
            .into_iter()
            .find(|(data, _)| data.len() < limits.max_bytes)
        {
            return Some(ResizedImage {
                data,
                mime: mime.to_owned(),
                original,
                size: (width, height),
                was_resized: true,
            });
        }
        let shrink = |n: u32| if n == 1 { 1 } else { (n * 3 / 4).max(1) };
        let next = (shrink(width), shrink(height));
        if next == (width, height) {
            return None;
        }
        (width, height) = next;
    }
}

/// pi's fallback type name for an image given without one (`image/<format>`).
fn image_format_name(bytes: &[u8]) -> &'static str {
    match image::guess_format(bytes) {
        Ok(image::ImageFormat::Jpeg) => "jpeg",
        Ok(image::ImageFormat::Gif) => "gif",
        Ok(image::ImageFormat::WebP) => "webp",
        Ok(image::ImageFormat::Bmp) => "bmp",
        _ => "png",
    }
}

fn encode_png(image: &image::DynamicImage) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    image
        .to_rgba8()
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .ok()?;
    Some(out)
}

fn encode_jpeg(image: &image::DynamicImage, quality: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
    image.to_rgb8().write_with_encoder(encoder).ok()?;
    Some(out)
}

/// The supported image MIME type of a file starting with `head`, or `None` (text).
pub(crate) fn sniff_mime(head: &[u8]) -> Option<&'static str> {
    if head.is_empty() {
        return None;
    }
    if head.starts_with(b"GIF") {
        return Some("image/gif");
    }
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        // FF D8 FF F7 is JPEG-LS, which pi does not send.
        return (head.get(3) != Some(&0xF7)).then_some("image/jpeg");
    }
    if head.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        return png_kind(head);
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    None
}

/// pi 1.6.0's own sniff (utils/mime.js): a full GIF header, a PNG whose first chunk is a
/// 13-byte `IHDR` and that has no `acTL` before its first `IDAT` (no APNG), and BMP besides.
pub(crate) fn sniff_mime_1_6(head: &[u8]) -> Option<&'static str> {
    let u32_be = |at: usize| {
        head.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return (head.get(3) != Some(&0xF7)).then_some("image/jpeg");
    }
    if head.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        let png = head.len() >= 16 && u32_be(8) == Some(13) && &head[12..16] == b"IHDR";
        let mut at = 8usize;
        let animated = loop {
            let (Some(length), Some(kind)) = (u32_be(at), head.get(at + 4..at + 8)) else {
                break false;
            };
            match kind {
                b"acTL" => break true,
                b"IDAT" => break false,
                _ => {}
            }
            let next = at + 8 + length as usize + 4;
            if next > head.len() {
                break false;
            }
            at = next;
        };
        return (png && !animated).then_some("image/png");
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    if head.starts_with(b"BM") && is_bmp(head) {
        return Some("image/bmp");
    }
    None
}

/// pi 1.6.0's BMP check: a consistent file header and a DIB header of a known size with one
/// colour plane and a usual depth.
fn is_bmp(head: &[u8]) -> bool {
    let byte = |at: usize| u64::from(head.get(at).copied().unwrap_or(0));
    let le16 = |at: usize| byte(at) | byte(at + 1) << 8;
    let le32 = |at: usize| le16(at) | le16(at + 2) << 16;
    if head.len() < 26 {
        return false;
    }
    let (size, pixels, dib) = (le32(2), le32(10), le32(14));
    if size != 0 && (size < 26 || pixels >= size) || pixels < 14 + dib {
        return false;
    }
    let (planes, bits) = match dib {
        12 => (le16(22), le16(24)),
        40..=124 if head.len() >= 30 => (le16(26), le16(28)),
        _ => return false,
    };
    planes == 1 && [1, 4, 8, 16, 24, 32].contains(&bits)
}

/// file-type's PNG chunk walk: an `acTL` chunk before the first `IDAT` makes it an APNG,
/// which pi does not treat as an image.
fn png_kind(head: &[u8]) -> Option<&'static str> {
    let size = head.len();
    let mut pos = 8usize;
    let mut seen_header = false;
    for _ in 0..512 {
        let header = head.get(pos..pos + 8)?;
        let length = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let kind = &header[4..8];
        pos += 8;
        if length < 0 {
            return None;
        }
        if kind == b"IHDR" {
            if length != 13 {
                return None;
            }
            seen_header = true;
        }
        match kind {
            b"IDAT" => return Some("image/png"),
            b"acTL" => return None,
            _ => {
                if !seen_header && kind != b"CgBI" {
                    return None;
                }
                let skip = length as usize + 4;
                if pos + skip > size {
                    // The sniffed bytes end inside the chunk: file-type settles on PNG.
                    return Some("image/png");
                }
                pos += skip;
            }
        }
        if pos + 8 >= size {
            break;
        }
    }
    Some("image/png")
}

/// Width and height from the image header, when it can be read.
pub(crate) fn dimensions(data: &[u8], mime: &str) -> Option<(u32, u32)> {
    let be16 = |i: usize| Some(u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?]) as u32);
    let le16 = |i: usize| Some(u16::from_le_bytes([*data.get(i)?, *data.get(i + 1)?]) as u32);
    let be32 = |i: usize| {
        let b = data.get(i..i + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let le24 = |i: usize| {
        let b = data.get(i..i + 3)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], 0]))
    };
    match mime {
        "image/png" => Some((be32(16)?, be32(20)?)),
        // A decoder needs a real GIF header, not just the three bytes the sniff looks at.
        "image/gif" if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") => {
            Some((le16(6)?, le16(8)?))
        }
        "image/webp" => match data.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)),
            b"VP8L" => {
                let b = data.get(21..25)?;
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        },
        "image/jpeg" => {
            let mut i = 2usize;
            loop {
                while *data.get(i)? != 0xFF {
                    i += 1;
                }
                while *data.get(i)? == 0xFF {
                    i += 1;
                }
                let marker = *data.get(i)?;
                i += 1;
                if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
                    continue;
                }
                let len = be16(i)? as usize;
                let is_sof =
                    (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker);
                if is_sof {
                    return Some((be16(i + 5)?, be16(i + 3)?));
                }
                if marker == 0xD9 || len < 2 {
                    return None;
                }
                i += len;
            }
        }
        _ => None,
    }
}

/// Standard base64 with padding.
pub(crate) fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid 2x3 RGBA PNG (IHDR, IDAT, IEND).
    pub(crate) fn tiny_png() -> Vec<u8> {
        let mut v = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        let chunk = |v: &mut Vec<u8>, kind: &[u8], data: &[u8]| {
            v.extend_from_slice(&(data.len() as u32).to_be_bytes());
            v.extend_from_slice(kind);
            v.extend_from_slice(data);
            v.extend_from_slice(&[0, 0, 0, 0]); // CRC: not checked by the sniff
        };
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&3u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        chunk(&mut v, b"IHDR", &ihdr);
        chunk(&mut v, b"IDAT", &[0x78, 0x9C, 0x63, 0, 0, 0, 1, 0, 1]);
        chunk(&mut v, b"IEND", &[]);
        v
    }

    #[test]
    fn sniffs_like_file_type() {
        assert_eq!(sniff_mime(&tiny_png()), Some("image/png"));
        assert_eq!(sniff_mime(b"GIF89a\x02\x00\x03\x00"), Some("image/gif"));
        assert_eq!(sniff_mime(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff_mime(&[0xFF, 0xD8, 0xFF, 0xF7]), None);
        assert_eq!(sniff_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_mime(b"hello"), None);
        assert_eq!(sniff_mime(b""), None);
        let mut apng = tiny_png();
        // Rename IDAT to acTL: an animated PNG.
        let at = apng.windows(4).position(|w| w == b"IDAT").unwrap();
        apng[at..at + 4].copy_from_slice(b"acTL");
        assert_eq!(sniff_mime(&apng), None);
    }

    #[test]
    fn pi_1_6_sniffs_its_own_way() {
        assert_eq!(sniff_mime_1_6(&tiny_png()), Some("image/png"));
        assert_eq!(sniff_mime_1_6(b"GIF is a format\n"), None);
        assert_eq!(sniff_mime_1_6(b"GIF87a\x01\x00"), Some("image/gif"));
        let mut apng = tiny_png();
        let at = apng.windows(4).position(|w| w == b"IDAT").unwrap();
        apng[at..at + 4].copy_from_slice(b"acTL");
        assert_eq!(sniff_mime_1_6(&apng), None);
        // A 1x1 24-bit BMP header, and one whose sizes would overflow a 32-bit sum.
        let mut bmp = b"BM".to_vec();
        for v in [58u32, 0, 54, 40, 1, 1] {
            bmp.extend(v.to_le_bytes());
        }
        bmp.extend([1, 0, 24, 0]);
        assert_eq!(sniff_mime_1_6(&bmp), Some("image/bmp"));
        bmp[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(sniff_mime_1_6(&bmp), None);
        assert_eq!(sniff_mime_1_6(b""), None);
    }

    #[test]
    fn reads_dimensions() {
        assert_eq!(dimensions(&tiny_png(), "image/png"), Some((2, 3)));
        assert_eq!(
            dimensions(b"GIF89a\x02\x00\x03\x00", "image/gif"),
            Some((2, 3))
        );
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00,
            0x03, 0x00, 0x02, 0x01, 0x01, 0x11, 0x00,
        ];
        assert_eq!(dimensions(&jpeg, "image/jpeg"), Some((2, 3)));
    }

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    fn encoded(image: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
        let mut out = Vec::new();
        image
            .write_to(&mut std::io::Cursor::new(&mut out), format)
            .unwrap();
        out
    }

    fn decoded(found: &InlineImage) -> image::DynamicImage {
        let data = found.data.as_deref().expect("the image is sent");
        let bytes = decode_base64(data);
        image::load_from_memory(&bytes).unwrap()
    }

    fn decode_base64(text: &str) -> Vec<u8> {
        let value = |c: u8| ALPHABET_INDEX.iter().position(|&a| a == c).unwrap() as u32;
        let mut out = Vec::new();
        for chunk in text.trim_end_matches('=').as_bytes().chunks(4) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &c)| n | value(c) << (18 - 6 * i));
            out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
        }
        out
    }
    const ALPHABET_INDEX: &[u8; 64] =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    #[test]
    fn an_image_too_large_is_scaled_into_pis_limits_with_pis_note() {
        let wide = image::DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
            3000,
            1000,
            image::Rgba([40, 90, 200, 255]),
        ));
        for pi in [
            pichamber_pi::PiVersion::V0_73,
            pichamber_pi::PiVersion::V1_6,
        ] {
            let found = inline_image(&encoded(&wide, image::ImageFormat::Png), pi).unwrap();
            // A flat image is smallest as PNG, for either release's choice.
            assert_eq!(found.mime, "image/png");
            assert_eq!(
                found.hints,
                [
                    "[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]"
                ]
            );
            let sent = decoded(&found);
            assert_eq!((sent.width(), sent.height()), (2000, 667));
            assert_eq!(sent.to_rgba8().get_pixel(1000, 300).0, [40, 90, 200, 255]);
        }
    }

    #[test]
    fn pi_1_6_converts_a_bmp_to_png_and_says_so() {
        let mut small = image::RgbImage::new(4, 3);
        small.put_pixel(1, 2, image::Rgb([255, 0, 0]));
        let bmp = encoded(
            &image::DynamicImage::ImageRgb8(small),
            image::ImageFormat::Bmp,
        );
        let found = inline_image(&bmp, pichamber_pi::PiVersion::V1_6).unwrap();
        assert_eq!(found.mime, "image/png");
        assert_eq!(
            found.hints,
            ["[Image converted from image/bmp to image/png.]"]
        );
        assert_eq!(decoded(&found).to_rgb8().get_pixel(1, 2).0, [255, 0, 0]);
        // 0.73.1 does not take a BMP for an image.
        assert_eq!(inline_image(&bmp, pichamber_pi::PiVersion::V0_73), None);
    }

    #[test]
    fn an_image_that_does_not_decode_is_omitted_with_pis_note() {
        // A PNG header that claims 5000x5000, then nothing an image decoder can read.
        let mut png = tiny_png();
        png[16..20].copy_from_slice(&5000u32.to_be_bytes());
        png[20..24].copy_from_slice(&5000u32.to_be_bytes());
        let found = inline_image(&png, pichamber_pi::PiVersion::V1_6).unwrap();
        assert_eq!(found.data, None);
        assert_eq!(found.omitted, OMITTED_IMAGE_NOTE);
    }
}
