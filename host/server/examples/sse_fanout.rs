//! Benchmark (not a test): how fast `pichamber serve` fans one session's events out to many
//! event-stream clients.
//!
//! Starts `pichamber serve` with the GUI test fixture, opens one session and N clients on its
//! event stream (`GET /api/pi/events?session=ID`), then sends `/app-next` prompts at a fixed
//! rate for a while. Each prompt appends a live panel, so it reaches every client as an
//! `extension.ui` event carrying the time it was sent; the client records the delay from
//! sending the prompt to each client reading its event and prints percentiles, what was
//! delivered, the server's memory and the CPU both sides used (so a client that is itself the
//! bottleneck shows).
//!
//! ```sh
//! cargo run --release -p pichamber-server --example sse_fanout -- \
//!     --pichamber target/release/pichamber --clients 1000 --rate 50
//! ```
//!
//! The client is async Rust on the same cores as the server; it scans each event's text for
//! the timestamp instead of parsing its JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;
use tokio::sync::Semaphore;

const TOKEN: &str = "bench-token-0123456789abcdef";
/// Marks the send time (ns since the benchmark started) inside a prompt's arguments.
const MARK: &str = "fanout:";

#[derive(Parser)]
#[command(about = "Benchmark: SSE fan-out of pichamber serve to many event-stream clients")]
struct Args {
    /// The pichamber binary to serve with.
    #[arg(long)]
    pichamber: PathBuf,
    /// Event-stream clients on the session.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Prompts (so panel events) per second.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// How long prompts are sent.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
}

/// What every client recorded.
#[derive(Default)]
struct Received {
    /// Delays in microseconds, from the prompt's send to its panel event read.
    delays_us: std::sync::Mutex<Vec<u32>>,
    events: AtomicU64,
}

fn main() {
    if let Err(e) = start(Args::parse()) {
        eprintln!("sse_fanout: {e:#}");
        std::process::exit(1);
    }
}

fn start(args: Args) -> Result<()> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if args.clients == 0 || !positive(args.rate) || !positive(args.seconds) {
        bail!("--clients, --rate and --seconds must be above 0 (e.g. --clients 1000 --rate 50)");
    }
    if !args.pichamber.exists() {
        bail!(
            "{}: no such binary (build it, e.g. cargo build --release, and pass its path)",
            args.pichamber.display()
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gui/gui-fixture.js");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("serve.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "listen": format!("127.0.0.1:{port}"),
            "extensions": [fixture],
            "users": [{ "name": "bench", "token": TOKEN }],
        })
        .to_string(),
    )?;
    let mut server = tokio::process::Command::new(&args.pichamber)
        .args(["serve", "--config"])
        .arg(&config)
        .env("PICHAMBER_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", args.pichamber.display()))?;
    let server_pid = server.id().context("serve exited at once")?;
    let mut listening = String::new();
    tokio::io::BufReader::new(server.stdout.take().context("no stdout")?)
        .read_line(&mut listening)
        .await?;
    if listening.is_empty() {
        bail!("serve exited before it listened");
    }
    let base = format!("http://127.0.0.1:{port}/api/pi");
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;

    let created: serde_json::Value = http
        .post(format!("{base}/sessions"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let session = created["id"].as_str().context("no session id")?.to_owned();

    let started = Instant::now();
    let received = Arc::new(Received::default());
    let opening = Instant::now();
    // Connections are opened a few hundred at a time: the listener's backlog is finite.
    let connecting = Arc::new(Semaphore::new(256));
    let mut ready = Vec::new();
    for _ in 0..args.clients {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<()>>();
        ready.push(rx);
        let stream_client = reqwest::Client::builder().tcp_nodelay(true).build()?;
        let url = format!("{base}/events?session={session}");
        let (received, connecting) = (received.clone(), connecting.clone());
        tokio::spawn(async move {
            let permit = connecting.acquire_owned().await;
            let response = stream_client.get(url).bearer_auth(TOKEN).send().await;
            drop(permit);
            match response.and_then(|r| r.error_for_status()) {
                Ok(response) => {
                    let _ = tx.send(Ok(()));
                    read_events(response, started, &received).await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e.into()));
                }
            }
        });
    }
    for rx in ready {
        rx.await.context("a client task ended")??;
    }
    let opened_in = opening.elapsed();
    let cpu_before = (cpu_ticks("self")?, cpu_ticks(&server_pid.to_string())?);

    // The prompts: one every 1/rate seconds, each sent without waiting for the last.
    let sent = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let load_started = Instant::now();
    let deadline = load_started + Duration::from_secs_f64(args.seconds);
    let mut posts = Vec::new();
    while Instant::now() < deadline {
        ticks.tick().await;
        let (http, sent, refused) = (http.clone(), sent.clone(), refused.clone());
        let url = format!("{base}/sessions/{session}/prompt");
        posts.push(tokio::spawn(async move {
            let at = started.elapsed().as_nanos();
            let text = format!("/app-next {MARK}{at}");
            let response = http
                .post(url)
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({ "text": text }))
                .send()
                .await;
            match response {
                Ok(r) if r.status().as_u16() == 202 => sent.fetch_add(1, Ordering::Relaxed),
                _ => refused.fetch_add(1, Ordering::Relaxed),
            };
        }));
    }
    for post in posts {
        post.await?;
    }
    let sent = sent.load(Ordering::Relaxed);
    let expected = sent * args.clients as u64;
    // Let what is in flight arrive.
    let drain_deadline = Instant::now() + Duration::from_secs(30);
    while received.delays_us.lock().unwrap().len() < expected as usize
        && Instant::now() < drain_deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let load_wall = load_started.elapsed();
    let cpu_after = (cpu_ticks("self")?, cpu_ticks(&server_pid.to_string())?);
    let (rss, hwm) = memory_kib(server_pid)?;

    let mut delays = received.delays_us.lock().unwrap().clone();
    delays.sort_unstable();
    let at = |p: f64| -> f64 {
        if delays.is_empty() {
            return f64::NAN;
        }
        let i = ((delays.len() as f64 * p).ceil() as usize).clamp(1, delays.len()) - 1;
        delays[i] as f64 / 1000.0
    };
    let share = |ticks: u64| ticks as f64 / 100.0 / load_wall.as_secs_f64() * 100.0;
    println!(
        "clients:             {} on one session, connected in {:.2} s",
        args.clients,
        opened_in.as_secs_f64()
    );
    println!(
        "prompts:             {sent} accepted ({} refused) at {} per second for {} s",
        refused.load(Ordering::Relaxed),
        args.rate,
        args.seconds
    );
    println!(
        "panel events:        {} of {expected} expected delivered ({} extension.ui events read)",
        delays.len(),
        received.events.load(Ordering::Relaxed)
    );
    println!(
        "prompt -> panel event delay (ms): p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0)
    );
    println!(
        "CPU while loaded:    server {:.0}% of a core, this client {:.0}% (2 cores in all)",
        share(cpu_after.1 - cpu_before.1),
        share(cpu_after.0 - cpu_before.0)
    );
    println!(
        "server RSS (MiB):    {:.1} now, {:.1} peak",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    server.kill().await?;
    Ok(())
}

/// Reads one event stream, recording each marked `extension.ui` event's delay.
async fn read_events(response: reqwest::Response, started: Instant, received: &Received) {
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut panel = false;
    let mut delays = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        buffer.extend_from_slice(&chunk);
        let mut consumed = 0;
        while let Some(end) = buffer[consumed..].iter().position(|b| *b == b'\n') {
            let line = &buffer[consumed..consumed + end];
            consumed += end + 1;
            if let Some(name) = line.strip_prefix(b"event:") {
                panel = name.trim_ascii() == b"extension.ui";
            } else if panel && line.starts_with(b"data:") {
                let now = started.elapsed().as_nanos();
                received.events.fetch_add(1, Ordering::Relaxed);
                if let Some(sent) = marked_time(line) {
                    delays.push((now.saturating_sub(sent) / 1000).min(u32::MAX as u128) as u32);
                }
            } else if line.is_empty() {
                panel = false;
            }
        }
        buffer.drain(..consumed);
        if !delays.is_empty() {
            received.delays_us.lock().unwrap().append(&mut delays);
        }
    }
}

/// The send time a prompt's `fanout:<ns>` argument carries, if this line has one.
fn marked_time(line: &[u8]) -> Option<u128> {
    let at = line
        .windows(MARK.len())
        .position(|w| w == MARK.as_bytes())?
        + MARK.len();
    let digits: &[u8] = &line[at..];
    let end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// User plus system CPU time of a process, in clock ticks (1/100 s).
fn cpu_ticks(pid: &str) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// (resident, peak resident) of a process in KiB.
fn memory_kib(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in status"))?;
        Ok(line.split_whitespace().nth(1).context("empty")?.parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}
