//! `Math.random`'s source once an instance is loaded: xoshiro128** seeded from the guest's
//! random source (the host's, seeded under `pichamber check`), 53 bits per number. Seeded at
//! load, not in the snapshot, whose seed would be every instance's. A C function rather than
//! the prelude's JavaScript: drawing costs no closure call, and seeding no host call's JSON.

use std::cell::Cell;

use javy::quickjs::{Ctx, qjs};

thread_local! {
    /// The generator's state; all zero until seeded (and never all zero after).
    static STATE: Cell<[u32; 4]> = const { Cell::new([0; 4]) };
}

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    crate::engine::install_c_function(ctx, "__pichamber_random", Some(random), 0)
}

/// Seeds the generator from the guest's random source.
pub fn seed() -> Result<(), String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot seed Math.random: {e}"))?;
    let mut state = [0u32; 4];
    for (word, chunk) in state.iter_mut().zip(bytes.chunks_exact(4)) {
        *word = u32::from_le_bytes(chunk.try_into().expect("four bytes"));
    }
    if state == [0; 4] {
        state[0] = 1; // the all-zero state would stay zero
    }
    STATE.with(|s| s.set(state));
    Ok(())
}

fn next_word() -> u32 {
    STATE.with(|cell| {
        let [mut a, mut b, mut c, mut d] = cell.get();
        let result = b.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = b << 9;
        c ^= a;
        d ^= b;
        b ^= c;
        a ^= d;
        c ^= t;
        d = d.rotate_left(11);
        cell.set([a, b, c, d]);
        result
    })
}

/// A number in [0, 1) from two words: their top 27 and 26 bits.
fn next_number() -> f64 {
    let high = f64::from(next_word() >> 5);
    let low = f64::from(next_word() >> 6);
    (high * 67_108_864.0 + low) / 9_007_199_254_740_992.0
}

unsafe extern "C" fn random(
    _ctx: *mut qjs::JSContext,
    _this: qjs::JSValue,
    _argc: std::ffi::c_int,
    _argv: *mut qjs::JSValue,
) -> qjs::JSValue {
    qjs::JS_NewFloat64(next_number())
}
