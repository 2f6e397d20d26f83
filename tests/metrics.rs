//! `--metrics-addr` with real parts: a real session scraped over TCP, its answer checked by Prometheus's own
//! `promtool`, and scraped by a real Prometheus server (Debian's `prometheus`, which `make test` installs) whose HTTP
//! API is then queried.

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{get, golow_command, metric, with_venv_path};

/// A headless session of ResNet-18 serving its metrics on a port the system chose; interrupted when dropped.
struct Served {
    golow: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl Served {
    fn start(tmp: &Path, impls: &str, steps: &str) -> Served {
        Served::with(tmp, &["--impl", impls, "--steps", steps])
    }

    /// With `args` besides the model, and `python` and `torchrun` on the PATH for `--cmd` workers.
    fn with(tmp: &Path, args: &[&str]) -> Served {
        Served::spawn(&mut Served::command(tmp, args))
    }

    /// Started with a soft limit of `soft` open files and a hard one of `hard`.
    fn with_open_files(tmp: &Path, args: &[&str], soft: u64, hard: u64) -> Served {
        let mut command = Served::command(tmp, args);
        // SAFETY: setrlimit is async-signal-safe, the one call between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        Served::spawn(&mut command)
    }

    fn command(tmp: &Path, args: &[&str]) -> Command {
        let mut command = golow_command(tmp);
        with_venv_path(&mut command)
            .args(["run", "--headless", "--model", "resnet18"])
            .args(args)
            .args(["--no-record", "--metrics-addr", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    fn spawn(command: &mut Command) -> Served {
        let mut golow = command.spawn().unwrap();
        let stderr = golow.stderr.take().unwrap();
        let (found, address) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("golow: metrics at http://") {
                    let _ = found.send(rest.trim_end_matches("/metrics").to_string());
                }
            }
        });
        let addr = address
            .recv_timeout(Duration::from_secs(60))
            .expect("golow says where it serves its metrics");
        Served { golow, addr }
    }

    /// The body of a scrape of `path`, and the status line.
    fn get(&self, path: &str) -> (String, String) {
        get(&self.addr, path)
    }

    /// A sample's value in a scrape of /metrics (`None` while it has none).
    fn value(&self, sample: &str) -> Option<f64> {
        metric(&self.get("/metrics").1, sample)
    }

    /// Waits until `sample` reaches `at_least`.
    fn wait_for(&self, sample: &str, at_least: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(v) = self.value(sample).filter(|v| *v >= at_least) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{sample} never reached {at_least}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.golow.id() as i32, libc::SIGINT);
        }
        let _ = self.golow.wait();
    }
}

#[test]
fn a_live_session_serves_what_promtool_accepts_and_a_bad_scraper_holds_up_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let served = Served::start(tmp.path(), "libtorch,pytorch", "400");
    let steps = r#"golow_steps_total{worker="libtorch"}"#;
    let before = served.wait_for(steps, 5.0);

    let (status, body) = served.get("/metrics");
    // An HTTP/1.0 request's answer speaks HTTP/1.0.
    assert_eq!(status, "HTTP/1.0 200 OK");
    for family in [
        "# TYPE golow_step_seconds histogram",
        "# TYPE golow_sample_seconds histogram",
        "# TYPE golow_steps_total counter",
        "# TYPE golow_throughput_samples_per_second gauge",
        "# TYPE golow_loss gauge",
        "# TYPE golow_process_resident_memory_bytes gauge",
    ] {
        assert!(body.contains(family), "{family} in {body}");
    }
    assert!(body.contains(r#"golow_step_seconds_bucket{worker="pytorch",le="+Inf"}"#));
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is installed (make test installs prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // A scraper that connects and says nothing, one that asks and never reads, and one that trickles its request a
    // byte at a time: each has 2 s to send its request, so a later scrape is answered within a few seconds (not the
    // hours a trickle could take), and the session goes on meanwhile.
    let silent = TcpStream::connect(&served.addr).unwrap();
    let mut deaf = TcpStream::connect(&served.addr).unwrap();
    write!(deaf, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let addr = served.addr.clone();
    let trickle = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        for byte in b"GET /metrics HTTP/1.0\r\n".iter().cycle().take(40) {
            if stream.write_all(&[*byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    assert_eq!(served.get("/elsewhere").0, "HTTP/1.0 404 Not Found");
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(8),
        "a scrape waited {waited:?} behind bad scrapers"
    );
    served.wait_for(steps, before + 3.0);
    drop((silent, deaf));
    trickle.join().unwrap();
}

/// A thousand idle or trickling connections held open (a slowloris, a port scanner, a stuck proxy) do not keep a
/// real scrape waiting, nor grow golow's memory, and golow closes every one of them: past 256 at once the oldest make
/// room for the newest, and the header-read timeout (2 s) cuts off the rest. How fast a scrape is answered meanwhile
/// is for `benches/metrics_endpoint.rs` to measure; here it has to be answered, with a margin no loaded machine
/// misses.
#[test]
fn a_crowd_of_idle_connections_does_not_silence_a_scrape() {
    allow_open_files(1200);
    let tmp = tempfile::tempdir().unwrap();
    // The common default limits: the endpoint's connections come on top of the soft one, not out of the session's.
    let args = ["--impl", "libtorch", "--steps", "400"];
    let served = Served::with_open_files(tmp.path(), &args, 1024, 4096);
    assert_eq!(
        soft_open_files(served.golow.id()),
        1024 + 256,
        "golow's soft limit with its endpoint"
    );
    let steps = r#"golow_steps_total{worker="libtorch"}"#;
    served.wait_for(steps, 2.0);
    let high_water = || common::high_water_kib(served.golow.id()).unwrap();
    let before_kib = high_water();
    let mut crowd: Vec<TcpStream> = Vec::new();
    for i in 0..1000 {
        let Ok(mut stream) = TcpStream::connect(&served.addr) else {
            continue;
        };
        // A third trickle the start of a request; the rest say nothing.
        if i % 3 == 0 {
            let _ = stream.write_all(b"GET /met");
        }
        crowd.push(stream);
    }
    assert!(crowd.len() >= 990, "{} connections opened", crowd.len());
    for round in 0..3 {
        let asked = Instant::now();
        let (status_line, body) = served.get("/metrics");
        let waited = asked.elapsed();
        assert_eq!(status_line, "HTTP/1.0 200 OK");
        assert!(body.contains(steps), "{body}");
        assert!(
            waited < Duration::from_secs(5),
            "round {round}: a scrape waited {waited:?} behind 1000 idle connections"
        );
        for stream in crowd.iter_mut().step_by(7) {
            let _ = stream.write_all(b"r");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let open = crowd
        .iter()
        .filter(|stream| !closed_by_then(stream, deadline))
        .count();
    assert_eq!(open, 0, "golow kept {open} idle connections open");
    let grew_kib = high_water().saturating_sub(before_kib);
    assert!(grew_kib < 32 * 1024, "golow grew by {grew_kib} KiB");
    drop(crowd);
    served.wait_for(steps, 3.0);
}

/// Raises this process's soft limit on open files to `files` (a crowd of connections needs them), as far as the hard
/// limit allows.
fn allow_open_files(files: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer, setrlimit reads one.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < files {
            limit.rlim_cur = files.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}

/// The soft limit on open files of process `pid`.
fn soft_open_files(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Max open files")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap()
}

/// Whether the other end closed `stream` (or reset it) by `deadline`, rather than leaving it open and silent.
fn closed_by_then(mut stream: &TcpStream, deadline: Instant) -> bool {
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(wait)).unwrap();
    loop {
        match stream.read(&mut [0u8; 256]) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        }
    }
}

/// Two ranks of a DDP job on gloo that step until stopped.
const DDP: &str = "\
import time, torch, torch.distributed as dist
dist.init_process_group('gloo')
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    opt.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    time.sleep(0.05)
";

#[test]
fn prometheus_scrapes_a_live_session() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("ddp.py"), DDP).unwrap();
    let served = Served::with(
        tmp.path(),
        &[
            "--impl",
            "libtorch",
            "--steps",
            "2000",
            "--threads",
            "1",
            "--cmd",
            "ddp=torchrun --standalone --nproc-per-node 2 ddp.py",
        ],
    );
    served.wait_for(r#"golow_steps_total{worker="libtorch"}"#, 1.0);
    served.wait_for(r#"golow_rank_steps_total{worker="ddp",rank="1"}"#, 5.0);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: golow\n    static_configs:\n      - targets: ['{}']\n",
            served.addr
        ),
    )
    .unwrap();
    let log = std::fs::File::create(tmp.path().join("prometheus.log")).unwrap();
    let prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            tmp.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("prometheus is installed (make test installs it)");
    let prometheus = KillOnDrop(prometheus);

    // Prometheus's own query API finds the step-time histogram, labelled with the worker and the job.
    let api = format!("127.0.0.1:{port}");
    let query = |promql: &str| -> Vec<serde_json::Value> {
        let (status, body) = get(&api, &format!("/api/v1/query?query={}", encoded(promql)));
        assert!(status.contains("200"), "{promql}: {status} {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // Three scrapes, so that rates have something to go on.
    let scrapes = r#"count_over_time(golow_steps_total{worker="libtorch"}[1m])"#;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let ready = TcpStream::connect(&api).is_ok();
        let scraped = ready
            .then(|| query(scrapes))
            .and_then(|result| result.first()?["value"][1].as_str()?.parse::<f64>().ok());
        if scraped.is_some_and(|n| n >= 3.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped golow three times: {}",
            std::fs::read_to_string(tmp.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let result = query(r#"golow_step_seconds_count{worker="libtorch"}"#);
    let series = &result[0];
    assert_eq!(series["metric"]["worker"], "libtorch", "{series}");
    assert_eq!(series["metric"]["job"], "golow", "{series}");
    let count: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{series}");
    // The distributed job's series carry each rank, the step-time histogram's as its own.
    let ranks = |promql: &str| -> Vec<String> {
        let mut ranks: Vec<String> = query(promql)
            .iter()
            .map(|r| r["metric"]["rank"].as_str().unwrap_or("none").to_string())
            .collect();
        ranks.sort();
        ranks
    };
    for family in [
        "golow_step_seconds_count",
        "golow_rank_steps_total",
        "golow_rank_resident_memory_bytes",
        "golow_rank_cpu_percent",
    ] {
        assert_eq!(
            ranks(&format!(r#"{family}{{worker="ddp"}}"#)),
            ["0", "1"],
            "{family}"
        );
    }
    let buckets = query(r#"golow_step_seconds_bucket{le="+Inf"}"#);
    assert_eq!(buckets[0]["metric"]["le"], "+Inf", "{buckets:?}");

    // Every query of the Grafana dashboard is one Prometheus takes, and those of what a CPU session has, find it.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/grafana/golow.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let exprs: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    for expr in exprs {
        let promql = expr
            .replace("$__rate_interval", "1m")
            .replace("$worker", ".*")
            .replace("$instance", ".*");
        // `query` asserts that Prometheus took it.
        let result = query(&promql);
        let cpu_side = [
            "golow_step_seconds",
            "golow_throughput",
            "golow_loss",
            "golow_process_resident",
            "golow_steps_total",
        ];
        let ranks_side = [
            "rank!=",
            "golow_arrival_skew",
            "golow_straggler_steps",
            "golow_rank_resident",
            "golow_rank_cpu",
        ];
        let expected = if ranks_side.iter().any(|m| promql.contains(m)) {
            Some("ddp")
        } else if cpu_side.iter().any(|m| promql.contains(m)) {
            Some("libtorch")
        } else {
            None
        };
        if let Some(worker) = expected {
            assert!(
                result.iter().any(|r| r["metric"]["worker"] == worker),
                "{promql}: {result:?}"
            );
        }
    }
    drop(prometheus);
    drop(served);
}

/// `text` as a URL's query value.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A process killed, and waited for, when the test ends however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
