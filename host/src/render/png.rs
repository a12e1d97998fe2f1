//! SVG text to PNG bytes, through `resvg`.

use std::sync::Arc;

use resvg::{tiny_skia, usvg};

/// Why a picture could not be rasterised.
#[derive(Debug)]
#[non_exhaustive]
pub enum PngError {
    /// The SVG text did not parse.
    Svg(String),
    /// The picture has no pixels, or too many to allocate.
    Size,
    /// PNG encoding failed.
    Encode(String),
}

impl core::fmt::Display for PngError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PngError::Svg(e) => write!(f, "cannot read the picture: {e}"),
            PngError::Size => f.write_str("the picture has no pixels or too many"),
            PngError::Encode(e) => write!(f, "cannot encode the PNG: {e}"),
        }
    }
}

impl std::error::Error for PngError {}

/// Rasterises `svg` at its own size. Text uses the system's fonts (the
/// panel asks for DejaVu Sans Mono, then any monospace font).
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, PngError> {
    let mut options = usvg::Options::default();
    let mut fonts = usvg::fontdb::Database::new();
    fonts.load_system_fonts();
    options.fontdb = Arc::new(fonts);
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| PngError::Svg(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or(PngError::Size)?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}
