//! bf16 bit conversions that match cuda/fsdp_kernels.cu exactly (round to
//! nearest even, NaN kept quiet), so the CPU reference rounds like the GPU.

/// Rounds an f32 to the nearest bf16 (ties to even) and returns its bits.
pub fn f32_to_bf16_bits(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7f80_0000) == 0x7f80_0000 && (u & 0x007f_ffff) != 0 {
        return ((u >> 16) | 0x0040) as u16;
    }
    let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1));
    (rounded >> 16) as u16
}

/// Widens bf16 bits to f32 (exact).
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Rounds an f32 through bf16 and back: the value a bf16 tensor would hold.
pub fn round_bf16(f: f32) -> f32 {
    bf16_bits_to_f32(f32_to_bf16_bits(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values_survive() {
        for v in [0.0f32, 1.0, -2.0, 0.5, 3.0, -1024.0] {
            assert_eq!(round_bf16(v), v);
        }
    }

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0);
        // 1 + 3 * 2^-8 lies between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 1.0 / 64.0);
        // Just above the tie rounds up.
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0 + 1e-6), 1.0 + 1.0 / 128.0);
    }

    #[test]
    fn nan_stays_nan_and_inf_stays_inf() {
        assert!(round_bf16(f32::NAN).is_nan());
        assert_eq!(round_bf16(f32::INFINITY), f32::INFINITY);
        assert_eq!(round_bf16(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }
}
