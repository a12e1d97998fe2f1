//! Fixed-point coordinates and binary-angle headings.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// The kernel's number type: 48 integer bits, 16 fractional bits.
///
/// Every coordinate, speed, radius and distance in the kernel is a `Fix`;
/// no float ever enters kernel state or logic.
pub type Fix = fixed::types::I48F16;

/// Binary-angle heading: 65536 units are one full turn, arithmetic wraps.
pub type Dir = u16;

/// A 2D position in world coordinates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Pos {
    /// Horizontal coordinate.
    pub x: Fix,
    /// Vertical coordinate.
    pub y: Fix,
}

impl Pos {
    /// A position from two fixed-point coordinates.
    pub const fn new(x: Fix, y: Fix) -> Self {
        Pos { x, y }
    }

    /// A position from whole-number coordinates.
    pub const fn from_ints(x: i32, y: i32) -> Self {
        Pos {
            x: Fix::from_bits((x as i64) << 16),
            y: Fix::from_bits((y as i64) << 16),
        }
    }

    /// Squared Euclidean distance in raw units (`2^-32` per unit).
    ///
    /// Exact: the world's bounds keep every coordinate difference below
    /// `2^62` raw, so the sum of squares fits a `u128`. Saturates rather
    /// than wrapping for positions outside any valid world.
    #[inline]
    pub fn dist2_raw(self, other: Pos) -> u128 {
        let dx = self.x.to_bits().abs_diff(other.x.to_bits());
        let dy = self.y.to_bits().abs_diff(other.y.to_bits());
        if (dx | dy) < 1 << 31 {
            // Each square is below 2^62: the common case stays in 64 bits.
            return u128::from(dx * dx + dy * dy);
        }
        let (dx, dy) = (u128::from(dx), u128::from(dy));
        (dx * dx).saturating_add(dy * dy)
    }
}

/// Shortest arc between two headings, in binary-angle units (0..=32768).
pub fn angle_diff(a: Dir, b: Dir) -> u16 {
    let d = a.wrapping_sub(b);
    d.min(d.wrapping_neg())
}

/// Square of a non-negative fixed-point length, in raw units (`2^-32` per unit).
pub fn len2_raw(len: Fix) -> u128 {
    let raw = len.to_bits().unsigned_abs();
    u128::from(raw) * u128::from(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angle_diff_wraps_the_short_way() {
        assert_eq!(angle_diff(10, 65530), 16);
        assert_eq!(angle_diff(65530, 10), 16);
        assert_eq!(angle_diff(0, 32768), 32768);
        assert_eq!(angle_diff(5, 5), 0);
    }

    #[test]
    fn dist2_is_exact_in_raw_units() {
        let a = Pos::from_ints(0, 0);
        let b = Pos::from_ints(3, 4);
        assert_eq!(a.dist2_raw(b), 25u128 << 32);
        assert_eq!(len2_raw(Fix::from_num(5)), 25u128 << 32);
    }
}
