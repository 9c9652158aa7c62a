//! LOLWUT [VERSION v] [...]: what Redis answers. The version (the server's own, or `v.0.0`)
//! picks the piece: 5 is Georg Nees's Schotter in Braille characters, 6 a city skyline in
//! terminal colours, any other only `Redis ver. <version>`. The pieces are drawn with the
//! same arithmetic as Redis's (C's float and int conversions), so what is not random (a
//! Schotter's first two rows of squares, a skyline one row high) is the same bytes; the
//! rest is random, as there.

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

pub fn lolwut(_: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    // Valkey prints its own release here, not the Redis one it reports elsewhere.
    let own = crate::version::valkey_release().unwrap_or_else(crate::version::release);
    let (piece, args) = if a.len() >= 3 && eq_ic(&a[1], "version") {
        let Some(v) = parse_i64(&a[2]) else { return Reply::not_integer() };
        // Redis formats the number as an unsigned int: -1 is 4294967295.0.0.
        (format!("{}.0.0", v as u32), &a[3..])
    } else {
        (own.to_string(), &a[1..])
    };
    let mut numbers = Vec::with_capacity(args.len());
    let b = piece.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let schotter =
        (at(0) == b'5' && at(1) == b'.' && at(2) != b'9') || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9');
    let skyline =
        (at(0) == b'6' && at(1) == b'.' && at(2) != b'9') || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9');
    let wanted = if schotter {
        3
    } else if skyline {
        2
    } else {
        0
    };
    for arg in args.iter().take(wanted) {
        let Some(n) = parse_i64(arg) else { return Reply::not_integer() };
        numbers.push(n);
    }
    let arg = |i: usize, default: i64, max: i64| numbers.get(i).copied().unwrap_or(default).clamp(1, max);
    let mut rng = fastrand::Rng::new();
    // C's rand(): 0 to RAND_MAX.
    let mut rand = move || rng.i32(0..=i32::MAX);
    let mut text = if schotter {
        let mut t =
            draw_schotter(arg(0, 66, 1000) as i32, arg(1, 8, 200) as i32, arg(2, 12, 200) as i32, &mut rand).braille();
        t.extend_from_slice(b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
        t
    } else if skyline {
        let mut canvas = Canvas::new(arg(0, 80, 1000) as i32, arg(1, 20, 1000) as i32, 3);
        draw_skyline(&mut canvas, &mut rand);
        let mut t = canvas.grays();
        t.extend_from_slice(
            b"\nDedicated to the 8 bit game developers of past and present.\n\
              Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
        );
        t
    } else {
        b"Redis ver. ".to_vec()
    };
    text.extend_from_slice(own.as_bytes());
    text.push(b'\n');
    Reply::Verbatim(text)
}

/// Pixels of one of four colours, row by row; drawing off the edge is a no-op and reads
/// there give 0, as Redis's canvas does.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, background: u8) -> Canvas {
        let size = width.max(0) as usize * height.max(0) as usize;
        Canvas { width, height, pixels: vec![background; size] }
    }

    fn index(&self, x: i32, y: i32) -> Option<usize> {
        (x >= 0 && x < self.width && y >= 0 && y < self.height).then(|| (x + y * self.width) as usize)
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if let Some(i) = self.index(x, y) {
            self.pixels[i] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        self.index(x, y).map_or(0, |i| self.pixels[i])
    }

    /// Bresenham's line, both ends drawn.
    fn line(&mut self, (mut x1, mut y1): (i32, i32), (x2, y2): (i32, i32)) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, 1);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), turned by `angle` radians. The types
    /// are C's: `size` and `angle` floats, the trigonometry in double.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32) {
        // The side of the square inscribed in a circle of radius 1 is sqrt(2): `size`
        // becomes the corners' distance from the centre.
        // Redis's ten-digit sqrt(2), not SQRT_2: a size between the two rounds differently.
        #[allow(clippy::approx_constant)]
        let size = (f64::from(size) / 1.4142135623) as f32;
        let size = f64::from(size).round() as f32;
        let mut k = (std::f64::consts::FRAC_PI_4 + f64::from(angle)) as f32;
        let mut corners = [(0, 0); 4];
        for c in &mut corners {
            let px = (f64::from(k).sin() * f64::from(size) + f64::from(x)).round() as i32;
            let py = (f64::from(k).cos() * f64::from(size) + f64::from(y)).round() as i32;
            *c = (px, py);
            k = (f64::from(k) + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4]);
        }
    }

    /// Two by four pixels a Braille character (U+2800 + the dots), a line per four rows.
    fn braille(&self) -> Vec<u8> {
        // Dot bits by pixel: column 0 rows 0-2 are bits 0-2, column 1 rows 0-2 bits 3-5,
        // row 3 bits 6 (column 0) and 7 (column 1).
        const DOTS: [(i32, i32, u32); 8] =
            [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 3), (1, 1, 4), (1, 2, 5), (0, 3, 6), (1, 3, 7)];
        let mut text = Vec::new();
        for y in (0..self.height).step_by(4) {
            for x in (0..self.width).step_by(2) {
                let dots =
                    DOTS.iter().filter(|&&(dx, dy, _)| self.get(x + dx, y + dy) != 0).fold(0, |b, d| b | 1 << d.2);
                let code = 0x2800 + dots;
                text.extend_from_slice(&[
                    0xE0 | (code >> 12) as u8,
                    0x80 | ((code >> 6) & 0x3F) as u8,
                    0x80 | (code & 0x3F) as u8,
                ]);
            }
            if y != self.height - 1 {
                text.push(b'\n');
            }
        }
        text
    }

    /// A space per pixel in the terminal's black, two grays or white (foreground and
    /// background both set), a line per row.
    fn grays(&self) -> Vec<u8> {
        let mut text = Vec::new();
        for y in 0..self.height {
            for x in 0..self.width {
                let escape: &[u8] = match self.get(x, y) {
                    1 => b"0;90;100m",
                    2 => b"0;37;47m",
                    3 => b"0;97;107m",
                    _ => b"0;30;40m",
                };
                text.extend_from_slice(b"\x1b[");
                text.extend_from_slice(escape);
                text.extend_from_slice(b" \x1b[0m");
            }
            if y != self.height - 1 {
                text.push(b'\n');
            }
        }
        text
    }
}

/// Schotter: rows of squares, turned and moved more at random the lower the row.
fn draw_schotter(cols: i32, per_row: i32, per_col: i32, rand: &mut impl FnMut() -> i32) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0.0f32; 3];
                for v in &mut r {
                    *v = rand() as f32 / i32::MAX as f32 / per_col as f32 * y as f32;
                }
                for v in &mut r {
                    if rand() % 2 != 0 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    canvas
}

/// A skyline: two rows of window-less buildings in the grays (the lighter behind), then
/// black ones in front with windows lit in either gray.
fn draw_skyline(canvas: &mut Canvas, rand: &mut impl FnMut() -> i32) {
    let h = canvas.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            // C's `h/2 + rand()%h/2`: the remainder is halved (or thirded), not h.
            let height = if color == 2 { h / 2 + rand() % h / 2 } else { h / 2 + rand() % h / 3 };
            building(canvas, offset, width, height, color, false, rand);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + rand() % h / 2;
        building(canvas, offset, width, height, 0, true, rand);
        offset += width + 5;
    }
}

/// One building standing on the bottom row, its roof two pixels narrower on each side;
/// windows two pixels wide and one high, away from the walls, each a random gray.
fn building(
    canvas: &mut Canvas,
    xoff: i32,
    width: i32,
    height: i32,
    color: u8,
    windows: bool,
    rand: &mut impl FnMut() -> i32,
) {
    let bottom = canvas.height - 1;
    let top = bottom - height + 1;
    let mut y = bottom;
    while y >= top {
        for x in xoff..xoff + width {
            if y == top && (x <= xoff + 1 || x >= xoff + width - 2) {
                continue;
            }
            let mut c = color;
            if windows && x > xoff + 1 && x < xoff + width - 2 && y > top + 1 && y < bottom - 1 {
                let (relx, rely) = (x - (xoff + 1), y - (top + 1));
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        c = 1 + (rand() % 2) as u8;
                        if c != color {
                            break;
                        }
                    }
                    // A window's second pixel takes its first one's gray.
                    if relx % 2 != 0 {
                        c = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, c);
        }
        y -= 1;
    }
}
