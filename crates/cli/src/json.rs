//! `--json`: the one machine-readable schema of every subcommand that reports results (info,
//! plan, convert, reorder, spmm, spmv, spamm, demo), documented in docs/cli-json.md.
//!
//! A run with `--json` prints exactly one JSON object on standard output and no text (errors stay
//! on standard error, as text, with the usual exit status). Every document has
//! `schema_version` ([`SCHEMA_VERSION`], raised on any change that is not a new field) and
//! `command`; keys are printed in sorted order. Conventions: times are milliseconds in fields ending `_ms`; rates in fields named
//! after their unit (`gflops`, `gb_per_s`); every enum is an object tagged by `kind` (a
//! snake_case name) with its fields beside it, never a bare string in one case and an object in
//! another; absent values are `null`.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::out::StdoutError;

/// Version of the schema described in docs/cli-json.md.
pub const SCHEMA_VERSION: u32 = 1;

/// Prints `body` (a struct) as the run's JSON document, with `schema_version` and `command`
/// added.
pub fn emit<T: Serialize>(command: &str, body: &T) -> anyhow::Result<()> {
    let mut doc = Map::new();
    doc.insert("schema_version".into(), SCHEMA_VERSION.into());
    doc.insert("command".into(), command.into());
    match serde_json::to_value(body)? {
        Value::Object(fields) => doc.extend(fields),
        other => {
            doc.insert("result".into(), other);
        }
    }
    let text = serde_json::to_string_pretty(&Value::Object(doc))?;
    crate::out::json(&text).map_err(|e: StdoutError| e.into())
}

/// `AccSpmm` → `acc_spmm`.
fn snake(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// An enum (serde's default, externally tagged form) as `{"kind": "variant", fields…}`: a unit
/// variant becomes `{"kind": …}`, a struct variant its fields beside `kind`, a newtype variant
/// its value under `value`.
pub fn tagged<T: Serialize>(e: &T) -> Value {
    match serde_json::to_value(e) {
        Ok(Value::String(s)) => kind(&snake(&s)),
        Ok(Value::Object(m)) if m.len() == 1 => {
            let (name, inner) = m.into_iter().next().expect("one entry");
            let mut o = Map::new();
            o.insert("kind".into(), snake(&name).into());
            match inner {
                Value::Object(fields) => o.extend(fields),
                other => {
                    o.insert("value".into(), other);
                }
            }
            Value::Object(o)
        }
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

/// `{"kind": name}`.
pub fn kind(name: &str) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), name.into());
    Value::Object(o)
}

/// `{"kind": name, key: value}`.
pub fn kind_with(name: &str, key: &str, value: impl Into<Value>) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), name.into());
    o.insert(key.into(), value.into());
    Value::Object(o)
}

/// Shape of the matrix a command read.
#[derive(Serialize)]
pub struct Matrix {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Stored values that are NaN or ±inf.
    pub non_finite: usize,
}

impl Matrix {
    /// The shape of `a`.
    pub fn of(a: &tcsparse::formats::Csr) -> Self {
        Self {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            non_finite: a.non_finite(),
        }
    }
}

/// Where the products ran: `{"kind": "gpu" | "cpu", "message": …}`.
pub fn backend(engine: &tcsparse::Engine) -> Value {
    let name = match engine.backend() {
        tcsparse::Backend::Gpu => "gpu",
        _ => "cpu",
    };
    kind_with(name, "message", engine.message())
}

/// `info`.
#[derive(Serialize)]
pub struct Info {
    /// The path read.
    pub input: String,
    /// What reading it took (absent for a layout file written by `convert`).
    pub read: Option<Read>,
    /// Shape.
    pub matrix: Matrix,
    /// Row statistics (formats::stats::MatrixStats).
    pub stats: Value,
    /// With `--formats`: every layout's size and blocks (formats::metrics::FormatReport).
    pub formats: Option<Value>,
    /// With `--reorder`: what each reordering does to the blocks.
    pub reorderings: Option<Reorderings>,
}

/// One file read: bytes and time.
#[derive(Serialize)]
pub struct Read {
    /// Bytes of the file (compressed bytes for gzip).
    pub file_bytes: u64,
    /// Bytes parsed (the decompressed text of a gzip file).
    pub text_bytes: u64,
    /// Whether the file was gzip-compressed.
    pub gzip: bool,
    /// Milliseconds from opening the file to the finished matrix.
    pub read_ms: f64,
    /// Parsed bytes per second, in GB/s.
    pub gb_per_s: f64,
}

impl Read {
    /// From the reader's report.
    pub fn of(r: &tcsparse::formats::mtx::ReadReport) -> Self {
        Read {
            file_bytes: r.file_bytes,
            text_bytes: r.text_bytes,
            gzip: r.gzip,
            read_ms: r.seconds * 1e3,
            gb_per_s: r.text_bytes_per_second() / 1e9,
        }
    }
}

/// `info --reorder`.
#[derive(Serialize)]
pub struct Reorderings {
    /// `{"kind": "symmetric" | "row_only"}`.
    pub mode: Value,
    /// One row per method.
    pub methods: Vec<ReorderingRow>,
}

/// One method of `info --reorder`.
#[derive(Serialize)]
pub struct ReorderingRow {
    /// Method name.
    pub method: String,
    /// MeanNNZTC with 8×8 blocks.
    pub mean_nnz_tc_8x8: f64,
    /// MeanNNZTC with 16×8 blocks.
    pub mean_nnz_tc_16x8: f64,
    /// 8×8 TC blocks.
    pub blocks_8x8: u64,
    /// Distinct B rows per non-empty 8-row window.
    pub b_rows_per_window: f64,
    /// Reordering time per nonzero, nanoseconds.
    pub ns_per_nnz: f64,
}

/// `plan`.
#[derive(Serialize)]
pub struct Plan {
    /// The path read.
    pub input: String,
    /// Device model name and where its numbers come from.
    pub device_model: Value,
    /// Columns of B.
    pub n: usize,
    /// What the planner was told about the matrix.
    pub features: Features,
    /// The chosen kernel, tagged.
    pub choice: Value,
    /// Its predicted time.
    pub predicted_ms: f64,
    /// Why.
    pub reason: String,
    /// Every modeled candidate, fastest first.
    pub candidates: Vec<Candidate>,
    /// Acc-SpMM's balancing decision (planner::ImbalanceDecision).
    pub imbalance: Option<Value>,
    /// The Acc-SpMM schedule's size when the choice is Acc-SpMM.
    pub schedule: Option<Schedule>,
}

/// `plan`'s matrix features.
#[derive(Serialize)]
pub struct Features {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Nonzeros.
    pub nnz: u64,
    /// 8-row windows.
    pub row_windows: usize,
    /// 8×8 TC blocks.
    pub blocks_8x8: u64,
    /// nnz per block.
    pub mean_nnz_tc: f64,
    /// cuTeSpMM's α.
    pub hrpb_alpha: f64,
}

/// One modeled kernel.
#[derive(Serialize)]
pub struct Candidate {
    /// The kernel, tagged.
    pub kernel: Value,
    /// Predicted time.
    pub ms: f64,
    /// Predicted rate.
    pub gflops: f64,
}

/// Size of an Acc-SpMM schedule.
#[derive(Serialize)]
pub struct Schedule {
    /// Thread blocks.
    pub thread_blocks: usize,
    /// Row windows split over several thread blocks (atomics).
    pub split_windows: usize,
    /// Most TC blocks one thread block handles.
    pub max_blocks_per_tb: usize,
}

/// `convert`.
#[derive(Serialize)]
pub struct Convert {
    /// The path read.
    pub input: String,
    /// The layout file written.
    pub output: String,
    /// `{"kind": "bittcf" | "metcf" | "hrpb" | "bitbsr"}`.
    pub layout: Value,
    /// Shape.
    pub matrix: Matrix,
    /// Blocks of the layout.
    pub blocks: usize,
    /// Bytes of the layout.
    pub bytes: usize,
    /// Build and write time.
    pub build_and_write_ms: f64,
}

/// `reorder`.
#[derive(Serialize)]
pub struct Reorder {
    /// The path read.
    pub input: String,
    /// The file written.
    pub output: String,
    /// `{"kind": "permutation"}` or `{"kind": "matrix", "gzip": bool}`.
    pub written: Value,
    /// `{"kind": "symmetric" | "row_only"}`.
    pub mode: Value,
    /// Method, time and blocks before and after (reorder::ReorderReport, `seconds` as `reorder_ms`).
    pub method: String,
    /// Time of computing the permutation.
    pub reorder_ms: f64,
    /// MeanNNZTC before.
    pub mean_nnz_tc_before: f64,
    /// MeanNNZTC after.
    pub mean_nnz_tc_after: f64,
    /// TC blocks before.
    pub blocks_before: u64,
    /// TC blocks after.
    pub blocks_after: u64,
}

/// What a preparation did (tcsparse::PrepareReport).
#[derive(Serialize)]
pub struct Prepare {
    /// The reordering computed, if any (reorder::ReorderReport).
    pub reorder: Option<Value>,
    /// Whether its permutation was applied.
    pub reordered: bool,
    /// `{"kind": "symmetric" | "row_only"}`.
    pub mode: Value,
    /// The automatic reordering's gate, when one ran (reorder::GateReport).
    pub reorder_gate: Option<Value>,
    /// The kernel set up (its display name).
    pub kernel: String,
    /// Why that kernel.
    pub kernel_note: String,
    /// `{"kind": "tf32" | "f32", "bound": text}`.
    pub precision: Value,
    /// TC blocks of the prepared BitTCF.
    pub blocks: usize,
    /// Its MeanNNZTC.
    pub mean_nnz_tc: f64,
    /// Acc-SpMM thread blocks (0 for other kernels).
    pub thread_blocks: usize,
    /// Split windows.
    pub split_windows: usize,
    /// Every tuning candidate timed (empty without tuning).
    pub tuning: Vec<Timed>,
    /// `{"kind": "off" | "miss" | "hit" | "rebuilt" | "store_failed", "reason"?}`.
    pub cache: Value,
    /// Stage times.
    pub reorder_ms: f64,
    /// BitTCF build.
    pub build_ms: f64,
    /// Planning.
    pub plan_ms: f64,
    /// Tuning.
    pub tune_ms: f64,
    /// Upload.
    pub upload_ms: f64,
    /// Plan cache work.
    pub cache_ms: f64,
    /// Everything.
    pub total_ms: f64,
}

/// A timed candidate.
#[derive(Serialize)]
pub struct Timed {
    /// What ran.
    pub candidate: String,
    /// Median time.
    pub ms: f64,
}

impl Prepare {
    /// The JSON of `r`.
    pub fn of(r: &tcsparse::PrepareReport) -> Self {
        let ms = |s: f64| s * 1e3;
        let precision = r.precision();
        Self {
            reorder: r
                .reorder
                .as_ref()
                .and_then(|x| serde_json::to_value(x).ok()),
            reordered: r.reordered,
            mode: tagged(&r.mode),
            reorder_gate: r
                .reorder_gate
                .as_ref()
                .and_then(|g| serde_json::to_value(g).ok()),
            kernel: r.kernel.to_string(),
            kernel_note: r.kernel_note.clone(),
            precision: kind_with(
                &precision.to_string().to_ascii_lowercase(),
                "bound",
                precision.bound_text(),
            ),
            blocks: r.blocks,
            mean_nnz_tc: r.mean_nnz_tc,
            thread_blocks: r.thread_blocks,
            split_windows: r.split_windows,
            tuning: r
                .tuning
                .iter()
                .map(|t| Timed {
                    candidate: t.candidate.clone(),
                    ms: t.ms,
                })
                .collect(),
            cache: match &r.cache {
                tcsparse::CacheOutcome::Off => kind("off"),
                tcsparse::CacheOutcome::Miss => kind("miss"),
                tcsparse::CacheOutcome::Hit => kind("hit"),
                tcsparse::CacheOutcome::Rebuilt(why) => kind_with("rebuilt", "reason", why.clone()),
                tcsparse::CacheOutcome::StoreFailed(why) => {
                    kind_with("store_failed", "reason", why.clone())
                }
            },
            reorder_ms: ms(r.reorder_s),
            build_ms: ms(r.build_s),
            plan_ms: ms(r.plan_s),
            tune_ms: ms(r.tune_s),
            upload_ms: ms(r.upload_s),
            cache_ms: ms(r.cache_s),
            total_ms: ms(r.total_s),
        }
    }
}

/// One timed product checked against the f64 reference.
#[derive(Serialize)]
pub struct Product {
    /// The kernel (display name).
    pub kernel: String,
    /// Columns of B.
    pub n: usize,
    /// Median time per product.
    pub ms: f64,
    /// 2·nnz·N / time.
    pub gflops: f64,
    /// `{"kind": "device"}` (median device time of the hot path) or `{"kind": "host"}` (the whole host call).
    pub timed: Value,
    /// max |C − C_ref| / (|A|·|B|).
    pub max_scaled_error: f64,
    /// The kernel's bound on it.
    pub error_bound: f64,
    /// ‖C − C_ref‖ / ‖C_ref‖.
    pub relative_error: f64,
    /// Rows of C the two errors compare, where not every row (a product beyond
    /// `measured::CHECK_MADDS` multiply-adds: evenly spaced rows and the longest); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_checked: Option<usize>,
    /// `{"kind": "f32" | "f16" | "bf16", "bound": text}`: the element type of B and C and what it
    /// adds to the bound (`error_bound` includes it).
    pub dtype: Value,
}

impl Product {
    /// The JSON of one measured product (B and C in f32).
    pub fn of(kernel: &str, n: usize, bound: f64, m: &crate::measured::Measured) -> Self {
        Self {
            dtype: dtype(tcsparse::DType::F32),
            kernel: kernel.to_string(),
            n,
            ms: m.ms,
            gflops: m.gflops,
            timed: kind(if m.device_time { "device" } else { "host" }),
            max_scaled_error: m.error.max_scaled,
            error_bound: bound,
            relative_error: m.error.relative,
            rows_checked: (!m.error.checked.is_all()).then(|| m.error.checked.count()),
        }
    }

    /// The product with B and C in `d`.
    pub fn with_dtype(self, d: tcsparse::DType) -> Self {
        Self {
            dtype: dtype(d),
            ..self
        }
    }
}

/// `{"kind": name, "bound": text}` of an element type.
fn dtype(d: tcsparse::DType) -> Value {
    kind_with(d.name(), "bound", d.bound_text())
}

/// `spmm` and `demo`.
#[derive(Serialize)]
pub struct Spmm {
    /// The path read (demo: the embedded matrix's name when no INPUT).
    pub input: String,
    /// Where it ran.
    pub backend: Value,
    /// Reading the file.
    pub read_ms: f64,
    /// Shape.
    pub matrix: Matrix,
    /// The preparation (absent for a split over several devices).
    pub prepare: Option<Prepare>,
    /// With `--devices`: the split.
    pub split: Option<Split>,
    /// One entry per stage, in the order they ran (the text output's stage lines).
    pub stages: Vec<Stage>,
    /// The product.
    pub product: Product,
    /// cuSPARSE's time at the same N (null on the CPU path).
    pub cusparse_ms: Option<f64>,
    /// Products after which the preparation pays against cuSPARSE (null: never, or no cuSPARSE time).
    pub break_even_calls: Option<f64>,
    /// demo on a GPU: the other kernels on the same reordered matrix.
    pub comparisons: Vec<Product>,
}

/// One stage of `spmm` or `demo` and its time.
#[derive(Serialize)]
pub struct Stage {
    /// `read`, `reorder`, `build`, `plan`, `tune`, `upload`, `cache`, `first_product`; with
    /// `spmm --devices`: `read`, `prepare` (every device's), `first_product`.
    pub stage: &'static str,
    /// Its time.
    pub ms: f64,
}

impl Stage {
    /// A stage of `ms` milliseconds.
    pub fn new(stage: &'static str, ms: f64) -> Self {
        Self { stage, ms }
    }

    /// The stages of a run on one device: reading (`read_ms`), the preparation's stages from its
    /// report (`cache` only where the plan cache is on) and the first product (`first_ms`, where
    /// it was timed).
    pub fn of_prepared(
        read_ms: f64,
        r: &tcsparse::PrepareReport,
        first_ms: Option<f64>,
    ) -> Vec<Self> {
        let mut stages = vec![
            Self::new("read", read_ms),
            Self::new("reorder", r.reorder_s * 1e3),
            Self::new("build", r.build_s * 1e3),
            Self::new("plan", r.plan_s * 1e3),
            Self::new("tune", r.tune_s * 1e3),
            Self::new("upload", r.upload_s * 1e3),
        ];
        if !matches!(r.cache, tcsparse::CacheOutcome::Off) {
            stages.push(Self::new("cache", r.cache_s * 1e3));
        }
        stages.extend(first_ms.map(|ms| Self::new("first_product", ms)));
        stages
    }
}

/// `spmm --devices`.
#[derive(Serialize)]
pub struct Split {
    /// The devices.
    pub devices: String,
    /// How B reached them.
    pub transport: String,
    /// Preparation on all of them.
    pub prepare_ms: f64,
    /// One part per device.
    pub parts: Vec<SplitPart>,
}

/// One device's rows.
#[derive(Serialize)]
pub struct SplitPart {
    /// First row.
    pub row_start: usize,
    /// One past the last row.
    pub row_end: usize,
    /// Its nonzeros.
    pub nnz: u64,
    /// Its kernel.
    pub kernel: String,
}

/// `spmv`.
#[derive(Serialize)]
pub struct Spmv {
    /// The path read.
    pub input: String,
    /// Where it ran.
    pub backend: Value,
    /// Reading the file.
    pub read_ms: f64,
    /// Shape.
    pub matrix: Matrix,
    /// Right-hand sides.
    pub n: usize,
    /// `{"kind": "f16" | "tf32" | "f32", "bound": …}`.
    pub precision: Value,
    /// The preparation (with tuning).
    pub prepare_ms: f64,
    /// The kernel kept (display name).
    pub kernel: String,
    /// Every candidate timed.
    pub tuning: Vec<Timed>,
    /// Median time per call.
    pub ms: f64,
    /// Bytes one call moves at least, per second.
    pub gb_per_s: f64,
    /// 2·nnz·n / time.
    pub gflops: f64,
    /// Bytes one call moves at least.
    pub bytes: usize,
    /// max |y − y_ref| / (|A|·|X|).
    pub max_scaled_error: f64,
    /// Its bound.
    pub error_bound: f64,
    /// ‖y − y_ref‖ / ‖y_ref‖.
    pub relative_error: f64,
}

/// `spamm`.
#[derive(Serialize)]
pub struct Spamm {
    /// The .npy path or the generator spec.
    pub input: String,
    /// Rows of A.
    pub m: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Columns of B.
    pub n: usize,
    /// `{"kind": "gpu" | "cpu" …}` as the library names it.
    pub backend: Value,
    /// `{"kind": precision}`.
    pub precision: Value,
    /// `{"kind": "tau" | "valid_ratio" | "rel_error", "value": …}`.
    pub target: Value,
    /// τ used.
    pub tau: f64,
    /// Share of tile products computed.
    pub valid_ratio: f64,
    /// Bound on ‖E‖F/‖C‖F from the skipped products.
    pub rel_bound: f64,
    /// Rounding bound of the precision.
    pub rounding_bound: f64,
    /// τ search attempts.
    pub attempts: u32,
    /// Rows per device, `[start, end)`.
    pub row_ranges: Vec<(usize, usize)>,
    /// How B reached the devices.
    pub transport: String,
    /// Measured ‖E‖F/‖C‖F on sampled rows (null when not measured).
    pub measured_error: Option<f64>,
    /// Rows it was measured on.
    pub measured_rows: usize,
    /// Reading or generating the input.
    pub input_ms: f64,
    /// The product with uploads and the τ search.
    pub spamm_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_are_tagged_uniformly() {
        use tcsparse::planner::KernelChoice;
        assert_eq!(
            tagged(&KernelChoice::Cusparse),
            serde_json::json!({"kind": "cusparse"})
        );
        assert_eq!(
            tagged(&KernelChoice::AccSpmm { balanced: true }),
            serde_json::json!({"kind": "acc_spmm", "balanced": true})
        );
        assert_eq!(
            tagged(&tcsparse::reorder::Mode::RowOnly),
            serde_json::json!({"kind": "row_only"})
        );
    }
}
