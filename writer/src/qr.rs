//! QR codes of short links (crate `qrcode`): SVG, which scales to any
//! print, and PNG of a bounded size (crate `png`), for pages and chats.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use lru::LruCache;
use qrcode::{Color, EcLevel, QrCode};

/// Modules of blank margin around the code, as the standard asks, so that
/// readers find it on any background.
const QUIET_ZONE: usize = 4;

/// Fewest pixels per module: readers miss codes drawn with one.
const MIN_MODULE_PIXELS: usize = 2;

/// The side of a PNG, in pixels, as asked with `?size=N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QrSize(u32);

impl QrSize {
    /// Small enough for a thumbnail, large enough that a short URL's code
    /// gets 3 pixels per module, which readers need.
    pub const MIN: u32 = 128;
    pub const MAX: u32 = 2048;
    /// Large enough to print a few centimetres wide and to scan from a
    /// screen.
    pub const DEFAULT: Self = Self(512);

    #[must_use]
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A size outside [`QrSize::MIN`] to [`QrSize::MAX`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("size {0} must be {min} to {max} pixels", min = QrSize::MIN, max = QrSize::MAX)]
pub struct SizeError(u64);

impl TryFrom<u64> for QrSize {
    type Error = SizeError;

    fn try_from(size: u64) -> Result<Self, SizeError> {
        u32::try_from(size)
            .ok()
            .filter(|size| (Self::MIN..=Self::MAX).contains(size))
            .map(Self)
            .ok_or(SizeError(size))
    }
}

impl fmt::Display for QrSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a code could not be made: only a text longer than a QR code holds
/// (about 2,300 characters of a URL), which a short URL never is.
#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("a QR code cannot hold {0}")]
    Encode(String, #[source] qrcode::types::QrError),
    #[error("encoding the PNG failed")]
    Png(#[from] png::EncodingError),
    #[error("drawing the PNG failed: {0}")]
    Drawing(String),
}

/// Medium error correction: a code still scans with some 15 % of it
/// smudged or covered.
fn code_of(text: &str) -> Result<QrCode, QrError> {
    QrCode::with_error_correction_level(text, EcLevel::M)
        .map_err(|e| QrError::Encode(text.to_owned(), e))
}

/// `text` as an SVG QR code, 8 units per module.
pub fn svg(text: &str) -> Result<String, QrError> {
    Ok(code_of(text)?
        .render::<qrcode::render::svg::Color<'_>>()
        .quiet_zone(true)
        .module_dimensions(8, 8)
        .build())
}

/// `text` as a grayscale PNG QR code: the largest whole number of pixels
/// per module that fits in `wanted`, the quiet zone included, but at least
/// [`MIN_MODULE_PIXELS`] (a long text's code may then exceed `wanted`).
pub fn png(text: &str, wanted: QrSize) -> Result<Vec<u8>, QrError> {
    let code = code_of(text)?;
    let modules = code.width();
    let dark = code.to_colors();
    let side_modules = modules + 2 * QUIET_ZONE;
    let scale = (wanted.get() as usize / side_modules).max(MIN_MODULE_PIXELS);
    let pixels_wide = side_modules * scale;
    let mut pixels = vec![u8::MAX; pixels_wide * pixels_wide];
    for (index, color) in dark.iter().enumerate() {
        if *color != Color::Dark {
            continue;
        }
        let (row, column) = (index / modules + QUIET_ZONE, index % modules + QUIET_ZONE);
        for y in row * scale..(row + 1) * scale {
            let line = y * pixels_wide;
            pixels[line + column * scale..line + (column + 1) * scale].fill(0);
        }
    }
    let mut out = Vec::new();
    let width = u32::try_from(pixels_wide).unwrap_or(u32::MAX);
    let mut encoder = png::Encoder::new(&mut out, width, width);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    Ok(out)
}

/// PNGs drawn at once, each on a blocking thread, never on a worker: a
/// 2048-pixel code is a 4 MiB image to fill and compress.
pub const RENDERS_AT_ONCE: usize = 2;

/// PNGs that may wait for their turn at once; past them a request is
/// answered 503 at once.
pub const RENDERS_WAITING: usize = 64;

/// How long a PNG waits for its turn before it is answered 503.
pub const RENDER_WAIT: Duration = Duration::from_secs(5);

/// The `Retry-After` of a PNG refused for being busy, in seconds.
pub const BUSY_RETRY_AFTER_S: u64 = 1;

/// PNGs kept, the most recently asked: one of 2048 pixels is some 20 KiB.
const PNGS_KEPT: NonZeroUsize = NonZeroUsize::new(64).expect("not zero");

/// Why a PNG was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(
        "too many QR codes are being drawn; try again in {BUSY_RETRY_AFTER_S} s, or fetch the SVG"
    )]
    Busy,
    #[error(transparent)]
    Qr(#[from] QrError),
}

/// Draws PNG codes off the request threads, a few at once, and keeps the
/// latest: one per writer, shared by its workers. A code is kept under the
/// text it holds and its size, so a code never outlives what it says.
pub struct PngRenderer {
    turns: Arc<tokio::sync::Semaphore>,
    waiting: AtomicUsize,
    running: Arc<AtomicUsize>,
    kept: Mutex<LruCache<(String, QrSize), actix_web::web::Bytes>>,
}

/// The writer's one renderer.
pub static RENDERER: LazyLock<PngRenderer> = LazyLock::new(PngRenderer::new);

/// Counts one in `counter` for as long as it lives, even when its request
/// is dropped half-way.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a AtomicUsize) -> (Self, usize) {
        let before = counter.fetch_add(1, Ordering::SeqCst);
        (Self(counter), before)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A PNG being drawn: holds its turn, and counts in `running`, until the
/// drawing ends, even when its request is gone by then.
struct Drawing {
    running: Arc<AtomicUsize>,
    _turn: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Drawing {
    fn drop(&mut self) {
        // Before the turn is given back (fields drop after this).
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PngRenderer {
    fn new() -> Self {
        Self {
            turns: Arc::new(tokio::sync::Semaphore::new(RENDERS_AT_ONCE)),
            waiting: AtomicUsize::new(0),
            running: Arc::new(AtomicUsize::new(0)),
            kept: Mutex::new(LruCache::new(PNGS_KEPT)),
        }
    }

    /// The PNG of `text` at `size`, if one was drawn lately: it costs nothing.
    pub fn kept(&self, text: &str, size: QrSize) -> Option<actix_web::web::Bytes> {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.get(&(text.to_owned(), size)).cloned()
    }

    /// PNGs being drawn now, and PNGs waiting for their turn.
    pub fn load(&self) -> (usize, usize) {
        (
            self.running.load(Ordering::SeqCst),
            self.waiting.load(Ordering::SeqCst),
        )
    }

    /// Draws `text` at `size` once its turn comes (at most
    /// [`RENDERS_AT_ONCE`] at a time), and keeps it; `Busy` when
    /// [`RENDERS_WAITING`] wait already, or the turn did not come within
    /// [`RENDER_WAIT`].
    pub async fn draw(
        &self,
        text: &str,
        size: QrSize,
    ) -> Result<actix_web::web::Bytes, RenderError> {
        let turn = {
            let (_waiting, before) = Counted::new(&self.waiting);
            if before >= RENDERS_WAITING {
                return Err(RenderError::Busy);
            }
            match tokio::time::timeout(RENDER_WAIT, Arc::clone(&self.turns).acquire_owned()).await {
                Ok(Ok(turn)) => turn,
                _ => return Err(RenderError::Busy),
            }
        };
        // Drawn by another request while this one waited.
        if let Some(png) = self.kept(text, size) {
            return Ok(png);
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        let drawing = Drawing {
            running: Arc::clone(&self.running),
            _turn: turn,
        };
        let owned = text.to_owned();
        let drawn = tokio::task::spawn_blocking(move || {
            let _drawing = drawing;
            png(&owned, size)
        })
        .await
        .map_err(|e| QrError::Drawing(e.to_string()))??;
        let png = actix_web::web::Bytes::from(drawn);
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .put((text.to_owned(), size), png.clone());
        Ok(png)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(QrSize::try_from(128).map(QrSize::get), Ok(128));
        assert_eq!(QrSize::try_from(2048).map(QrSize::get), Ok(2048));
        for refused in [0, 127, 2049, u64::MAX] {
            let error = QrSize::try_from(refused).unwrap_err().to_string();
            assert!(error.contains("128 to 2048 pixels"), "{error}");
        }
    }

    #[test]
    fn a_png_fits_its_size_in_whole_pixels_per_module() {
        let url = "http://127.0.0.1:6081/l/Lm25";
        let png = png(url, QrSize::try_from(300).unwrap()).unwrap();
        let decoder = png::Decoder::new(png.as_slice());
        let reader = decoder.read_info().unwrap();
        let (width, height) = (reader.info().width, reader.info().height);
        assert_eq!(width, height);
        let modules = u32::try_from(code_of(url).unwrap().width() + 2 * QUIET_ZONE).unwrap();
        assert!(width <= 300 && width > 300 - modules, "{width}");
        assert_eq!(width % modules, 0);
    }

    #[test]
    fn an_svg_is_an_svg() {
        let svg = svg("http://127.0.0.1:6081/l/Lm25").unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{svg}");
    }
}
