//! A rank's place in the job from its launcher's variables (torchrun's or Slurm's), and its whole
//! rendezvous ([`RankEnv::rendezvous`]).

use std::time::Duration;

use super::{
    DEFAULT_MASTER_PORT, DEFAULT_TIMEOUT, MAX_WORLD_SIZE, Master, PAYLOAD_BYTES, RendezvousError,
    join,
};

/// Where the launcher variables came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// torch.distributed's variables (torchrun, `torch.distributed.launch`, or set by hand).
    Torch,
    /// Slurm's (srun).
    Slurm,
}

/// One rank's place in the job, from the launcher's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnv {
    /// Global rank, `0..world_size`.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Rank on this host: the CUDA device this rank uses.
    pub local_rank: usize,
    /// Host of rank 0.
    pub master_addr: String,
    /// The port rank 0's store listens on ([`RankEnv::from_lookup`] says how it is chosen).
    pub store_port: u16,
    /// How long the rendezvous may take.
    pub timeout: Duration,
    /// Which variables were read.
    pub launcher: Launcher,
}

fn parse_var<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>, RendezvousError> {
    match get(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
            RendezvousError::Env(format!("{name}={v:?} is not a valid non-negative number"))
        }),
    }
}

impl RankEnv {
    /// Reads the process environment ([`RankEnv::from_lookup`]).
    pub fn from_env() -> Result<Self, RendezvousError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the launcher variables through `get`:
    /// `RANK` + `WORLD_SIZE` (+ `LOCAL_RANK`) when `RANK` is set, else `SLURM_PROCID` +
    /// `SLURM_NTASKS` (+ `SLURM_LOCALID`). `LOCAL_RANK` may be left out only with one rank.
    /// `MASTER_ADDR` is needed with two or more ranks (Slurm does not set it: the job script
    /// exports the first host of the allocation). The store listens on `TCSPARSE_STORE_PORT`
    /// when set; else on `MASTER_PORT` (default 29500), or on `MASTER_PORT + 1` when torchrun's
    /// agent already holds `MASTER_PORT` with its own store (`TORCHELASTIC_USE_AGENT_STORE=True`).
    /// `TCSPARSE_DIST_TIMEOUT` (seconds, > 0) sets the timeout (default 300 s).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, RendezvousError> {
        let (launcher, rank_var, world_var, local_var) = if get("RANK").is_some() {
            (Launcher::Torch, "RANK", "WORLD_SIZE", "LOCAL_RANK")
        } else if get("SLURM_PROCID").is_some() {
            (
                Launcher::Slurm,
                "SLURM_PROCID",
                "SLURM_NTASKS",
                "SLURM_LOCALID",
            )
        } else {
            return Err(RendezvousError::Env(
                "neither RANK/WORLD_SIZE (torchrun) nor SLURM_PROCID/SLURM_NTASKS (srun) is set: \
                 start one process per GPU with a launcher, or set them by hand"
                    .into(),
            ));
        };
        let rank: usize = parse_var(&get, rank_var)?.unwrap_or(0);
        let world_size: usize = parse_var(&get, world_var)?.ok_or_else(|| {
            RendezvousError::Env(format!("{rank_var} is set but {world_var} is not"))
        })?;
        if world_size == 0 || world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Env(format!(
                "{world_var}={world_size}: must be 1..={MAX_WORLD_SIZE}"
            )));
        }
        if rank >= world_size {
            return Err(RendezvousError::Env(format!(
                "{rank_var}={rank} is not below {world_var}={world_size}"
            )));
        }
        let local_rank = match parse_var::<usize>(&get, local_var)? {
            Some(l) => l,
            None if world_size == 1 => 0,
            None => {
                return Err(RendezvousError::Env(format!(
                    "{local_var} is not set (it picks this rank's GPU on its host)"
                )));
            }
        };
        let master_addr = match get("MASTER_ADDR") {
            Some(a) if !a.trim().is_empty() => a.trim().to_string(),
            _ if world_size == 1 => "127.0.0.1".to_string(),
            _ => {
                return Err(RendezvousError::Env(
                    "MASTER_ADDR is not set (the host of rank 0; under Slurm export the first \
                     host of the allocation)"
                        .into(),
                ));
            }
        };
        let master_port: u16 = parse_var(&get, "MASTER_PORT")?.unwrap_or(DEFAULT_MASTER_PORT);
        let agent_store = get("TORCHELASTIC_USE_AGENT_STORE")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let store_port = match parse_var::<u16>(&get, "TCSPARSE_STORE_PORT")? {
            Some(p) => p,
            None if agent_store => master_port.checked_add(1).ok_or_else(|| {
                RendezvousError::Env("MASTER_PORT=65535 leaves no port for the store".into())
            })?,
            None => master_port,
        };
        let timeout = match parse_var::<f64>(&get, "TCSPARSE_DIST_TIMEOUT")? {
            None => DEFAULT_TIMEOUT,
            Some(s) if s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(RendezvousError::Env(format!(
                    "TCSPARSE_DIST_TIMEOUT={s}: must be in (0, 86400] seconds"
                )));
            }
        };
        Ok(Self {
            rank,
            world_size,
            local_rank,
            master_addr,
            store_port,
            timeout,
            launcher,
        })
    }

    /// `MASTER_ADDR:store_port`.
    pub fn store_addr(&self) -> String {
        if self.master_addr.contains(':') && !self.master_addr.starts_with('[') {
            format!("[{}]:{}", self.master_addr, self.store_port)
        } else {
            format!("{}:{}", self.master_addr, self.store_port)
        }
    }

    /// The whole rendezvous for this rank: rank 0 listens on every interface at the store port
    /// and hands out `make_payload()`'s bytes (called once the port is bound); the others join.
    /// Every rank returns the same payload, or an error within the timeout (+ [`REPLY_GRACE`](super::REPLY_GRACE)).
    /// One rank needs no network: it returns `make_payload()`'s bytes.
    pub fn rendezvous<E>(
        &self,
        make_payload: impl FnOnce() -> Result<[u8; PAYLOAD_BYTES], E>,
    ) -> Result<[u8; PAYLOAD_BYTES], E>
    where
        E: From<RendezvousError>,
    {
        if self.world_size == 1 {
            return make_payload();
        }
        if self.rank == 0 {
            let master = Master::bind(
                &format!("0.0.0.0:{}", self.store_port),
                self.world_size,
                self.timeout,
            )?;
            let payload = make_payload()?;
            master.serve(&payload)?;
            Ok(payload)
        } else {
            Ok(join(
                &self.store_addr(),
                self.rank,
                self.world_size,
                self.timeout,
            )?)
        }
    }
}
