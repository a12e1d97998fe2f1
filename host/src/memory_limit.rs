//! The memory a world may reserve, checked before it is built.
//!
//! A config valid by every documented limit can still ask for more memory
//! than the machine has (`max_entities` at its maximum with a handful of
//! observers reserves about 4 GB). Rather than die in an allocation
//! failure, `lockgrid run` and `lockgrid serve` compare the world's
//! [`Config::reserved_bytes`] with a limit first and refuse with the
//! figures.
//!
//! The default limit is **half of the machine's memory** (`MemTotal` of
//! `/proc/meminfo` on Linux), leaving the rest to the system, the
//! journal's page cache and the server's buffers; where that cannot be
//! read, [`FALLBACK_MACHINE_BYTES`] stands for the machine. `--max-memory`
//! sets the limit instead (`4GiB`, `512MiB`, `100000000`; see
//! [`parse_size`]).

use core::fmt;

use lockgrid_kernel::Config;

/// The machine's memory assumed where `/proc/meminfo` cannot be read: 4 GiB.
pub const FALLBACK_MACHINE_BYTES: u64 = 4 << 30;

/// Where a limit came from, for the refusal's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// Half of the machine's memory, as read from `/proc/meminfo`.
    HalfOfMachine(u64),
    /// Half of [`FALLBACK_MACHINE_BYTES`]: the machine's memory is unknown.
    HalfOfFallback,
    /// Given by the user (`--max-memory`).
    Given,
}

/// A limit on the memory a world may reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// The limit, in bytes.
    pub bytes: u64,
    /// Where it came from.
    pub source: LimitSource,
}

impl MemoryLimit {
    /// A limit given by the user.
    pub fn given(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            source: LimitSource::Given,
        }
    }

    /// The default: half of this machine's memory, or of
    /// [`FALLBACK_MACHINE_BYTES`] where it cannot be read.
    pub fn default_for_machine() -> MemoryLimit {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_total(&text));
        match total {
            Some(total) => MemoryLimit {
                bytes: total / 2,
                source: LimitSource::HalfOfMachine(total),
            },
            None => MemoryLimit {
                bytes: FALLBACK_MACHINE_BYTES / 2,
                source: LimitSource::HalfOfFallback,
            },
        }
    }

    /// `Ok` when a world built from `config` fits under the limit.
    pub fn check(&self, config: &Config) -> Result<(), TooMuchMemory> {
        self.fits(config.reserved_bytes(), None)
    }

    /// `Ok` when a world built from `config` and `clients` connections
    /// reserving `per_client` bytes each fit under the limit together.
    pub fn check_serving(
        &self,
        config: &Config,
        clients: u64,
        per_client: u64,
    ) -> Result<(), TooMuchMemory> {
        self.check(config)?;
        let needed = config
            .reserved_bytes()
            .saturating_add(clients.saturating_mul(per_client));
        self.fits(needed, Some((clients, per_client)))
    }

    fn fits(&self, needed: u64, clients: Option<(u64, u64)>) -> Result<(), TooMuchMemory> {
        if needed <= self.bytes {
            Ok(())
        } else {
            Err(TooMuchMemory {
                needed,
                limit: *self,
                clients,
            })
        }
    }
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Size(self.bytes))?;
        match self.source {
            LimitSource::HalfOfMachine(total) => {
                write!(f, " (half of this machine's {})", Size(total))
            }
            LimitSource::HalfOfFallback => write!(
                f,
                " (half of an assumed {}: the machine's memory could not be read)",
                Size(FALLBACK_MACHINE_BYTES)
            ),
            LimitSource::Given => write!(f, " (--max-memory)"),
        }
    }
}

/// A world refused before it was built: it would reserve more than the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooMuchMemory {
    /// What the world would reserve, bytes ([`Config::reserved_bytes`]).
    pub needed: u64,
    /// The limit it exceeds.
    pub limit: MemoryLimit,
    /// When the world's clients are counted in `needed`: how many, and the
    /// bytes each one's connection reserves.
    pub clients: Option<(u64, u64)>,
}

impl fmt::Display for TooMuchMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.clients {
            None => write!(
                f,
                "the world would reserve about {} ({} bytes), more than the memory limit of {}; \
                 lower max_entities, max_observers or max_view, bound max_visible, or set the \
                 limit with --max-memory",
                Size(self.needed),
                self.needed,
                self.limit
            ),
            Some((clients, each)) => write!(
                f,
                "the world and its {clients} clients would reserve about {} ({} bytes; each \
                 client's connection about {}), more than the memory limit of {}; lower \
                 max_clients or max_view, or set the limit with --max-memory",
                Size(self.needed),
                self.needed,
                Size(each),
                self.limit
            ),
        }
    }
}

impl std::error::Error for TooMuchMemory {}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// Reads a size: a whole number of bytes, optionally followed by a unit:
/// `B`, `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024; `K`, `M`, `G`, `T`
/// alone mean the same) or `kB`, `MB`, `GB`, `TB` (powers of 1000).
/// Units are case-insensitive except that `kB`…`TB` need their `B`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let bad = || format!("{text:?} is not a size (e.g. 4GiB, 512MiB, 1000000)");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Bytes for people: `1.9 GiB`, `512.0 MiB`, `900 B`.
struct Size(u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut unit = 0;
        let mut scale = 1024u64;
        while unit + 1 < UNITS.len() && self.0 / scale >= 1024 {
            unit += 1;
            scale *= 1024;
        }
        // Tenths, rounded down: a figure never claims more than there is.
        let tenths = u128::from(self.0) * 10 / u128::from(scale);
        write!(f, "{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1000000"), Ok(1_000_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("7kB"), Ok(7_000));
        for bad in [
            "",
            "GiB",
            "-1GiB",
            "1.5GiB",
            "4 parsecs",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("20000000TiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:       16318480 kB\nMemFree:         1234 kB\n";
        assert_eq!(mem_total(text), Some(16318480 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn the_default_is_half_of_something() {
        let limit = MemoryLimit::default_for_machine();
        match limit.source {
            LimitSource::HalfOfMachine(total) => assert_eq!(limit.bytes, total / 2),
            LimitSource::HalfOfFallback => assert_eq!(limit.bytes, FALLBACK_MACHINE_BYTES / 2),
            LimitSource::Given => panic!("not given"),
        }
        assert!(limit.bytes > 0);
    }

    #[test]
    fn a_world_above_the_limit_is_refused_with_the_figures() {
        let config = Config::default();
        let needed = config.reserved_bytes();
        assert_eq!(MemoryLimit::given(needed).check(&config), Ok(()));
        let refused = MemoryLimit::given(needed - 1).check(&config).unwrap_err();
        assert_eq!(refused.needed, needed);
        let text = refused.to_string();
        assert!(
            text.starts_with(&format!("the world would reserve about {}", Size(needed))),
            "{text}"
        );
        assert!(text.contains(&format!("({needed} bytes)")), "{text}");
        assert!(text.contains("(--max-memory)"), "{text}");
    }

    #[test]
    fn sizes_print_for_people() {
        assert_eq!(Size(900).to_string(), "900 B");
        assert_eq!(Size(1536).to_string(), "1.5 KiB");
        assert_eq!(Size(2_040_109_465).to_string(), "1.8 GiB");
        assert_eq!(Size(u64::MAX).to_string(), "16777215.9 TiB");
    }
}
