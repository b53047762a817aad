//! [`GeneratorSpec`]: a generator and its parameters, serde-able, parsed from and printed as
//! `name:key=value,...`.

use super::*;

/// A generator and its parameters: serde-able (externally tagged, so bincode works too), parsed from
/// and printed as `name:key=value,...`.
///
/// Spec strings (defaults in brackets; aliases after `|`):
/// * `uniform:rows|n=R,cols=[R],avg|nnz_per_row=[16],seed=[0]`
/// * `banded:n=N,hb|half_bandwidth=[8],fill=[1],seed=[0]`
/// * `rmat:scale=S,ef|edge_factor=[16],a=[0.57],b=[0.19],c=[0.19],d=[0.05],seed=[0]`
/// * `clustered:n=N,bs|block_size=[64],density|intra_density=[0.5],inter|inter_nnz_per_row=[1],seed=[0]`
/// * `algebraic:n=N` (dense, every entry stored)
/// * `exponential:n=N,rate=[0.5]` (dense, every entry stored)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeneratorSpec {
    /// [`uniform_random`].
    Uniform {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Average nonzeros per row.
        nnz_per_row: f64,
        /// Seed.
        seed: u64,
    },
    /// [`banded`].
    Banded {
        /// Rows and columns.
        n: usize,
        /// Largest |i − j| stored.
        half_bandwidth: usize,
        /// Probability of each off-diagonal in-band entry, in (0, 1].
        fill: f64,
        /// Seed.
        seed: u64,
    },
    /// [`rmat`].
    Rmat {
        /// log2 of the number of vertices.
        scale: u32,
        /// Edges per vertex before deduplication.
        edge_factor: u32,
        /// Top-left quadrant probability.
        a: f64,
        /// Top-right quadrant probability.
        b: f64,
        /// Bottom-left quadrant probability.
        c: f64,
        /// Bottom-right quadrant probability.
        d: f64,
        /// Seed.
        seed: u64,
    },
    /// [`clustered_block_diagonal`].
    Clustered {
        /// Rows and columns.
        n: usize,
        /// Diagonal block size.
        block_size: usize,
        /// Probability of each in-block entry, in (0, 1].
        intra_density: f64,
        /// Average entries per row outside the row's block.
        inter_nnz_per_row: f64,
        /// Seed.
        seed: u64,
    },
    /// [`algebraic_decay_dense`], stored as a fully dense CSR.
    Algebraic {
        /// Rows and columns.
        n: usize,
    },
    /// [`exponential_decay_dense`], stored as a fully dense CSR.
    Exponential {
        /// Rows and columns.
        n: usize,
        /// Decay rate per unit of |i − j|.
        rate: f64,
    },
}

impl GeneratorSpec {
    /// Generates the matrix.
    pub fn build(&self) -> Result<Csr, GenError> {
        match *self {
            Self::Uniform {
                rows,
                cols,
                nnz_per_row,
                seed,
            } => uniform_random(rows, cols, nnz_per_row, seed),
            Self::Banded {
                n,
                half_bandwidth,
                fill,
                seed,
            } => banded(n, half_bandwidth, fill, seed),
            Self::Rmat {
                scale,
                edge_factor,
                a,
                b,
                c,
                d,
                seed,
            } => rmat(scale, edge_factor, (a, b, c, d), seed),
            Self::Clustered {
                n,
                block_size,
                intra_density,
                inter_nnz_per_row,
                seed,
            } => clustered_block_diagonal(n, block_size, intra_density, inter_nnz_per_row, seed),
            Self::Algebraic { n } | Self::Exponential { n, .. } => {
                if let Self::Exponential { rate, .. } = *self {
                    check_rate(rate)?;
                }
                check_dense(n)?;
                let (values, n) = self.build_dense(&Limits::global())?;
                dense_to_csr(n, values)
            }
        }
    }

    /// The dense `n × n` row-major matrix of a decay generator (`algebraic:` or `exponential:`)
    /// and `n`, its `4·n²` bytes checked against `limits` before anything is allocated, built in
    /// parallel. A sparse generator is a [`GenError::Invalid`] (build it with
    /// [`GeneratorSpec::build`]).
    pub fn build_dense(&self, limits: &Limits) -> Result<(Vec<f32>, usize), GenError> {
        match *self {
            Self::Algebraic { n } => Ok((try_algebraic_decay_dense(n, limits)?, n)),
            Self::Exponential { n, rate } => Ok((try_exponential_decay_dense(n, rate, limits)?, n)),
            _ => Err(invalid(
                "generator",
                format!("`{self}` is sparse; dense matrices come from algebraic: or exponential:"),
            )),
        }
    }

    /// The seed, for the seeded generators.
    pub fn seed(&self) -> Option<u64> {
        match *self {
            Self::Uniform { seed, .. }
            | Self::Banded { seed, .. }
            | Self::Rmat { seed, .. }
            | Self::Clustered { seed, .. } => Some(seed),
            Self::Algebraic { .. } | Self::Exponential { .. } => None,
        }
    }

    /// The same spec with `seed` replaced (no change for the deterministic dense generators).
    pub fn with_seed(mut self, new: u64) -> Self {
        match &mut self {
            Self::Uniform { seed, .. }
            | Self::Banded { seed, .. }
            | Self::Rmat { seed, .. }
            | Self::Clustered { seed, .. } => *seed = new,
            Self::Algebraic { .. } | Self::Exponential { .. } => {}
        }
        self
    }
}

impl fmt::Display for GeneratorSpec {
    /// The canonical spec string with every parameter; it parses back to an equal spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uniform {
                rows,
                cols,
                nnz_per_row,
                seed,
            } => {
                write!(
                    f,
                    "uniform:rows={rows},cols={cols},avg={nnz_per_row},seed={seed}"
                )
            }
            Self::Banded {
                n,
                half_bandwidth,
                fill,
                seed,
            } => {
                write!(
                    f,
                    "banded:n={n},hb={half_bandwidth},fill={fill},seed={seed}"
                )
            }
            Self::Rmat {
                scale,
                edge_factor,
                a,
                b,
                c,
                d,
                seed,
            } => {
                write!(
                    f,
                    "rmat:scale={scale},ef={edge_factor},a={a},b={b},c={c},d={d},seed={seed}"
                )
            }
            Self::Clustered {
                n,
                block_size,
                intra_density,
                inter_nnz_per_row,
                seed,
            } => write!(
                f,
                "clustered:n={n},bs={block_size},density={intra_density},inter={inter_nnz_per_row},seed={seed}"
            ),
            Self::Algebraic { n } => write!(f, "algebraic:n={n}"),
            Self::Exponential { n, rate } => write!(f, "exponential:n={n},rate={rate}"),
        }
    }
}

/// Key/value pairs of a spec, consumed as they are read so that unknown keys can be reported.
pub(super) struct Params<'a> {
    spec: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl Params<'_> {
    fn err(&self, message: String) -> GenError {
        GenError::Spec {
            spec: self.spec.to_string(),
            message,
        }
    }

    fn take<T: FromStr>(&mut self, names: &[&str], default: Option<T>) -> Result<T, GenError> {
        let Some(i) = self.pairs.iter().position(|(k, _)| names.contains(k)) else {
            return default
                .ok_or_else(|| self.err(format!("missing required parameter `{}`", names[0])));
        };
        let (k, v) = self.pairs.remove(i);
        if self.pairs.iter().any(|(k2, _)| names.contains(k2)) {
            return Err(self.err(format!("parameter `{}` given twice", names[0])));
        }
        v.parse()
            .map_err(|_| self.err(format!("`{k}={v}` is not a valid value")))
    }

    fn finish(self) -> Result<(), GenError> {
        match self.pairs.first() {
            Some((k, _)) => Err(self.err(format!("unknown parameter `{k}`"))),
            None => Ok(()),
        }
    }
}

impl FromStr for GeneratorSpec {
    type Err = GenError;

    /// Parses `name:key=value,...` (see the type documentation for names, keys and defaults).
    fn from_str(spec: &str) -> Result<Self, GenError> {
        let bad = |message: String| GenError::Spec {
            spec: spec.to_string(),
            message,
        };
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let mut pairs = Vec::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| bad(format!("`{item}` is not key=value")))?;
            pairs.push((k.trim(), v.trim()));
        }
        let mut p = Params { spec, pairs };
        let out = match name.trim() {
            "uniform" => {
                let rows = p.take(&["rows", "n"], None)?;
                Self::Uniform {
                    rows,
                    cols: p.take(&["cols"], Some(rows))?,
                    nnz_per_row: p.take(&["avg", "nnz_per_row"], Some(16.0))?,
                    seed: p.take(&["seed"], Some(0))?,
                }
            }
            "banded" => Self::Banded {
                n: p.take(&["n"], None)?,
                half_bandwidth: p.take(&["hb", "half_bandwidth"], Some(8))?,
                fill: p.take(&["fill"], Some(1.0))?,
                seed: p.take(&["seed"], Some(0))?,
            },
            "rmat" => Self::Rmat {
                scale: p.take(&["scale"], None)?,
                edge_factor: p.take(&["ef", "edge_factor"], Some(16))?,
                a: p.take(&["a"], Some(0.57))?,
                b: p.take(&["b"], Some(0.19))?,
                c: p.take(&["c"], Some(0.19))?,
                d: p.take(&["d"], Some(0.05))?,
                seed: p.take(&["seed"], Some(0))?,
            },
            "clustered" => Self::Clustered {
                n: p.take(&["n"], None)?,
                block_size: p.take(&["bs", "block_size"], Some(64))?,
                intra_density: p.take(&["density", "intra_density"], Some(0.5))?,
                inter_nnz_per_row: p.take(&["inter", "inter_nnz_per_row"], Some(1.0))?,
                seed: p.take(&["seed"], Some(0))?,
            },
            "algebraic" => Self::Algebraic {
                n: p.take(&["n"], None)?,
            },
            "exponential" => Self::Exponential {
                n: p.take(&["n"], None)?,
                rate: p.take(&["rate"], Some(0.5))?,
            },
            other => {
                return Err(bad(format!(
                    "unknown generator `{other}` (expected uniform, banded, rmat, clustered, algebraic or exponential)"
                )));
            }
        };
        p.finish()?;
        Ok(out)
    }
}
