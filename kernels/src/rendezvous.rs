//! Multi-process launch: reading the torchrun/SLURM environment, and handing
//! the NCCL unique id from rank 0 to the others over TCP.
//!
//! Rank 0 listens, waits until every other rank has connected and said which
//! rank it is, and only then sends each the 128-byte id, so NCCL's own init
//! (which has no timeout) starts only once all ranks are known to be alive.
//! Both sides give up at a deadline with an error naming who is missing.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

/// Size of `ncclUniqueId`.
pub const ID_BYTES: usize = 128;
const MAGIC: &[u8; 8] = b"fsdpref1";

#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    #[error("environment: {0}")]
    Env(String),
    #[error("cannot resolve rendezvous address {addr}: {reason}")]
    Resolve { addr: String, reason: String },
    #[error("rank 0 cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "rendezvous timed out after {waited_s} s: {arrived} of {expected} other ranks arrived \
         (missing ranks {missing:?})"
    )]
    Missing {
        waited_s: u64,
        arrived: usize,
        expected: usize,
        missing: Vec<usize>,
    },
    #[error("rank {rank} could not reach rank 0 at {addr} within {waited_s} s: {last_error}")]
    Unreachable {
        rank: usize,
        addr: String,
        waited_s: u64,
        last_error: String,
    },
    #[error("rendezvous protocol error: {0}")]
    Protocol(String),
    #[error("rendezvous I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Where this process sits in a multi-process job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessLaunch {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    /// host:port rank 0 listens on.
    pub addr: String,
}

fn parse_usize(
    env: &BTreeMap<String, String>,
    key: &str,
) -> Result<Option<usize>, RendezvousError> {
    match env.get(key) {
        None => Ok(None),
        Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
            RendezvousError::Env(format!("{key}={v:?} is not a non-negative integer"))
        }),
    }
}

/// Reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (torchrun), with
/// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID as fallbacks. `None` when no rank
/// variable is set: the single-process, thread-per-GPU mode.
///
/// torchrun's agent already serves its own store on MASTER_PORT
/// (TORCHELASTIC_USE_AGENT_STORE=True), so fsdp-ref then uses MASTER_PORT+1;
/// FSDP_REF_PORT overrides both.
pub fn launch_from_env(
    env: &BTreeMap<String, String>,
) -> Result<Option<ProcessLaunch>, RendezvousError> {
    let rank = match parse_usize(env, "RANK")? {
        Some(r) => r,
        None => match parse_usize(env, "SLURM_PROCID")? {
            Some(r) => r,
            None => return Ok(None),
        },
    };
    let world = parse_usize(env, "WORLD_SIZE")?
        .or(parse_usize(env, "SLURM_NTASKS")?)
        .ok_or_else(|| RendezvousError::Env("RANK is set but WORLD_SIZE is not".into()))?;
    if world == 0 || rank >= world {
        return Err(RendezvousError::Env(format!(
            "RANK {rank} is outside WORLD_SIZE {world}"
        )));
    }
    let local_rank = parse_usize(env, "LOCAL_RANK")?
        .or(parse_usize(env, "SLURM_LOCALID")?)
        .unwrap_or(rank);
    let host = env
        .get("MASTER_ADDR")
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    let port = match parse_usize(env, "FSDP_REF_PORT")? {
        Some(p) => p,
        None => {
            let base = parse_usize(env, "MASTER_PORT")?
                .ok_or_else(|| RendezvousError::Env("RANK is set but MASTER_PORT is not".into()))?;
            let agent_store = env
                .get("TORCHELASTIC_USE_AGENT_STORE")
                .map(|v| v.eq_ignore_ascii_case("true"));
            if agent_store == Some(true) {
                base + 1
            } else {
                base
            }
        }
    };
    if port == 0 || port > 65535 {
        return Err(RendezvousError::Env(format!(
            "rendezvous port {port} is out of range"
        )));
    }
    Ok(Some(ProcessLaunch {
        rank,
        world,
        local_rank,
        addr: format!("{host}:{port}"),
    }))
}

fn resolve(addr: &str) -> Result<SocketAddr, RendezvousError> {
    addr.to_socket_addrs()
        .map_err(|e| RendezvousError::Resolve {
            addr: addr.into(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| RendezvousError::Resolve {
            addr: addr.into(),
            reason: "no address".into(),
        })
}

/// Binds rank 0's listener on `addr` (all interfaces at its port when the
/// host is not local, as torchrun's store does).
pub fn listen(addr: &str) -> Result<TcpListener, RendezvousError> {
    let target = resolve(addr)?;
    let bind_addr = if target.ip().is_loopback() {
        target
    } else {
        SocketAddr::from(([0, 0, 0, 0], target.port()))
    };
    TcpListener::bind(bind_addr).map_err(|source| RendezvousError::Bind {
        addr: bind_addr,
        source,
    })
}

/// Rank 0: waits for ranks 1..world to connect, then sends each `id`.
pub fn serve(
    listener: &TcpListener,
    world: usize,
    id: &[u8; ID_BYTES],
    timeout: Duration,
) -> Result<(), RendezvousError> {
    let start = Instant::now();
    listener.set_nonblocking(true)?;
    let mut peers: BTreeMap<usize, TcpStream> = BTreeMap::new();
    while peers.len() + 1 < world {
        if start.elapsed() >= timeout {
            let missing = (1..world).filter(|r| !peers.contains_key(r)).collect();
            return Err(RendezvousError::Missing {
                waited_s: timeout.as_secs(),
                arrived: peers.len(),
                expected: world - 1,
                missing,
            });
        }
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(Duration::from_secs(5)))?;
                let mut hello = [0u8; 16];
                if stream.read_exact(&mut hello).is_err() || &hello[..8] != MAGIC {
                    continue; // not one of ours (a port scanner, a stale client): ignore it
                }
                let mut rank_bytes = [0u8; 8];
                rank_bytes.copy_from_slice(&hello[8..]);
                let rank = u64::from_le_bytes(rank_bytes) as usize;
                if rank == 0 || rank >= world {
                    return Err(RendezvousError::Protocol(format!(
                        "a peer claims rank {rank} in a world of {world}"
                    )));
                }
                if peers.insert(rank, stream).is_some() {
                    return Err(RendezvousError::Protocol(format!(
                        "rank {rank} connected twice"
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
    for stream in peers.values_mut() {
        stream.write_all(id)?;
        stream.flush()?;
    }
    Ok(())
}

/// Ranks 1..: connects to rank 0 (retrying until the deadline, since rank 0
/// may start later), says its rank and reads the id.
pub fn fetch(
    addr: &str,
    rank: usize,
    timeout: Duration,
) -> Result<[u8; ID_BYTES], RendezvousError> {
    let start = Instant::now();
    let target = resolve(addr)?;
    let mut last_error = String::from("no attempt");
    let mut stream = loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(RendezvousError::Unreachable {
                rank,
                addr: addr.into(),
                waited_s: timeout.as_secs(),
                last_error,
            });
        }
        match TcpStream::connect_timeout(&target, left.min(Duration::from_secs(2))) {
            Ok(s) => break s,
            Err(e) => {
                last_error = e.to_string();
                thread::sleep(Duration::from_millis(100));
            }
        }
    };
    let mut hello = [0u8; 16];
    hello[..8].copy_from_slice(MAGIC);
    hello[8..].copy_from_slice(&(rank as u64).to_le_bytes());
    stream.write_all(&hello)?;
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left))?;
    let mut id = [0u8; ID_BYTES];
    stream.read_exact(&mut id).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            RendezvousError::Unreachable {
                rank,
                addr: addr.into(),
                waited_s: timeout.as_secs(),
                last_error: "rank 0 never sent the NCCL id (another rank is missing?)".into(),
            }
        }
        std::io::ErrorKind::UnexpectedEof => RendezvousError::Protocol(
            "rank 0 closed the connection before sending the NCCL id (it gave up or failed)".into(),
        ),
        _ => RendezvousError::Io(e),
    })?;
    Ok(id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_rank_means_single_process() {
        assert_eq!(launch_from_env(&env(&[])).expect("ok"), None);
    }

    #[test]
    fn torchrun_variables() {
        let l = launch_from_env(&env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ]))
        .expect("ok")
        .expect("multi-process");
        assert_eq!(
            l,
            ProcessLaunch {
                rank: 1,
                world: 2,
                local_rank: 1,
                addr: "10.0.0.1:29501".into()
            }
        );
    }

    #[test]
    fn slurm_fallback_and_port_override() {
        let l = launch_from_env(&env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "29500"),
            ("FSDP_REF_PORT", "40000"),
        ]))
        .expect("ok")
        .expect("multi-process");
        assert_eq!(l.rank, 3);
        assert_eq!(l.world, 4);
        assert_eq!(l.addr, "node1:40000");
    }

    #[test]
    fn bad_environment_is_an_error() {
        assert!(launch_from_env(&env(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "2"),
            ("MASTER_PORT", "1")
        ]))
        .is_err());
        assert!(launch_from_env(&env(&[("RANK", "x")])).is_err());
        assert!(launch_from_env(&env(&[("RANK", "0"), ("MASTER_PORT", "1")])).is_err());
        assert!(launch_from_env(&env(&[("RANK", "0"), ("WORLD_SIZE", "1")])).is_err());
    }

    #[test]
    fn id_reaches_every_rank() {
        let listener = listen("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let mut id = [0u8; ID_BYTES];
        for (i, b) in id.iter_mut().enumerate() {
            *b = i as u8;
        }
        let clients: Vec<_> = (1..3)
            .map(|rank| {
                let addr = addr.clone();
                thread::spawn(move || fetch(&addr, rank, Duration::from_secs(10)))
            })
            .collect();
        serve(&listener, 3, &id, Duration::from_secs(10)).expect("serve");
        for c in clients {
            let got = c.join().expect("thread").expect("fetch");
            assert_eq!(got, id);
        }
    }

    #[test]
    fn missing_rank_times_out_with_its_number() {
        let listener = listen("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let client = thread::spawn(move || fetch(&addr, 1, Duration::from_secs(3)));
        let err = serve(&listener, 3, &[0u8; ID_BYTES], Duration::from_millis(500)).unwrap_err();
        match err {
            RendezvousError::Missing {
                arrived,
                expected,
                missing,
                ..
            } => {
                assert_eq!((arrived, expected), (1, 2));
                assert_eq!(missing, vec![2]);
            }
            other => panic!("unexpected {other}"),
        }
        drop(listener);
        // The waiting client learns that rank 0 gave up rather than hanging.
        assert!(client.join().expect("thread").is_err());
    }

    #[test]
    fn unreachable_rank_zero_times_out() {
        // Bind then drop to get a port with (almost certainly) nobody listening.
        let port = listen("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let err = fetch(&format!("127.0.0.1:{port}"), 1, Duration::from_millis(400)).unwrap_err();
        assert!(
            matches!(err, RendezvousError::Unreachable { rank: 1, .. }),
            "{err}"
        );
    }
}
