//! What a run does: its length (short for CI, long with `TASKHOST_SOAK=long`) and the seeded
//! randomness that orders its reloads and operations.

/// How many reloads of each plugin, and the seed that orders them (printed so a run can be replayed).
pub struct Plan {
    pub reloads_per_plugin: usize,
    pub seed: u64,
}

impl Plan {
    pub fn from_env() -> Self {
        let long = std::env::var("TASKHOST_SOAK").is_ok_and(|v| v == "long");
        let seed = std::env::var("TASKHOST_SOAK_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        Self {
            reloads_per_plugin: if long { 200 } else { 25 },
            seed,
        }
    }
}

/// xorshift64*: deterministic per seed, good enough to pick moments and operations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
