//! Cost of one scheduler tick: every job's fire times in a 10-second window
//! `[t, t+10s)`, with precompiled schedules, next to the floor of doing the
//! same with croner 3 (`find_next_occurrence` in a loop, no clones).
//!
//! ```text
//! cargo bench -p paddock --bench scan [-- N...]
//! ```
//!
//! Job mix (deterministic pseudo-random): 60% every minute / every 2-5
//! minutes at a random second, 30% hourly / daily / weekday-daily at random
//! minutes and hours, 10% seconds-level (`*/5`, `*/10`, `*/15`, `*/30`),
//! spread over 10 zones including Lord Howe and Kolkata. Times reported:
//! wall clock and this thread's CPU time (`/proc/thread-self/schedstat`,
//! Linux only; "n/a" elsewhere), median of several ticks.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use paddock::schedule::Schedule;

const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "America/Los_Angeles",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
];

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn job(rng: &mut Rng) -> (String, Tz) {
    let tz: Tz = ZONES[rng.below(ZONES.len() as u64) as usize]
        .parse()
        .unwrap();
    let s = rng.below(60);
    let m = rng.below(60);
    let h = rng.below(24);
    let roll = rng.below(100);
    let expr = if roll < 60 {
        match rng.below(4) {
            0 | 1 => format!("{s} * * * * *"),
            2 => format!("{s} */5 * * * *"),
            _ => format!("{s} */2 * * * *"),
        }
    } else if roll < 90 {
        match rng.below(3) {
            0 => format!("{s} {m} * * * *"),
            1 => format!("0 {m} {h} * * *"),
            _ => format!("0 {m} {h} * * MON-FRI"),
        }
    } else {
        let step = [5, 10, 15, 30][rng.below(4) as usize];
        format!("*/{step} * * * * *")
    };
    (expr, tz)
}

/// CPU time consumed by this thread so far, if the platform tells.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

struct Sample {
    wall: Duration,
    cpu: Option<Duration>,
    fires: usize,
}

fn measure(mut tick: impl FnMut() -> usize) -> Sample {
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let fires = black_box(tick());
    let wall = t0.elapsed();
    let cpu = match (cpu0, thread_cpu()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Sample { wall, cpu, fires }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run(n: usize, ticks: usize) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ n as u64);
    let specs: Vec<(String, Tz)> = (0..n).map(|_| job(&mut rng)).collect();

    let t0 = Instant::now();
    let ours: Vec<Schedule> = specs
        .iter()
        .map(|(e, tz)| Schedule::cron(e, *tz).unwrap())
        .collect();
    let compile_ours = t0.elapsed();
    let parser = CronParser::builder().seconds(Seconds::Required).build();
    let t0 = Instant::now();
    let floor: Vec<(Cron, Tz)> = specs
        .iter()
        .map(|(e, tz)| (parser.parse(e).unwrap(), *tz))
        .collect();
    let compile_croner = t0.elapsed();

    let base: DateTime<Utc> = "2027-06-15T12:34:50Z".parse().unwrap();
    let (mut our_wall, mut our_cpu, mut cr_wall, mut cr_cpu) = (vec![], vec![], vec![], vec![]);
    let (mut our_fires, mut cr_fires) = (0, 0);
    for i in 0..ticks {
        let from = base + TimeDelta::seconds(10 * i as i64);
        let to = from + TimeDelta::seconds(10);

        let s = measure(|| {
            let mut fires = 0;
            for sched in &ours {
                for t in sched.occurrences(from, to) {
                    black_box(t);
                    fires += 1;
                }
            }
            fires
        });
        our_wall.push(s.wall);
        our_cpu.extend(s.cpu);
        our_fires += s.fires;

        let s = measure(|| {
            let mut fires = 0;
            for (cron, tz) in &floor {
                let mut at = tz.from_utc_datetime(&from.naive_utc());
                let mut inclusive = true;
                while let Ok(next) = cron.find_next_occurrence(&at, inclusive) {
                    if next.with_timezone(&Utc) >= to {
                        break;
                    }
                    black_box(&next);
                    fires += 1;
                    at = next;
                    inclusive = false;
                }
            }
            fires
        });
        cr_wall.push(s.wall);
        cr_cpu.extend(s.cpu);
        cr_fires += s.fires;
    }

    let (ow, cw) = (median(our_wall), median(cr_wall));
    let cpu = |v: Vec<Duration>| {
        if v.is_empty() {
            "n/a".to_string()
        } else {
            format!("{:.1} ms", ms(median(v)))
        }
    };
    println!("N = {n} jobs, {ticks} ticks of 10 s from {base}");
    println!(
        "  compile: schedule {:.0} ms, croner {:.0} ms",
        ms(compile_ours),
        ms(compile_croner)
    );
    println!(
        "  schedule : {:>9.2} ms/tick wall, {:>10} cpu, {:>7.3} us/job, {} fires/tick",
        ms(ow),
        cpu(our_cpu),
        ow.as_secs_f64() * 1e6 / n as f64,
        our_fires / ticks
    );
    println!(
        "  croner   : {:>9.2} ms/tick wall, {:>10} cpu, {:>7.3} us/job, {} fires/tick",
        ms(cw),
        cpu(cr_cpu),
        cw.as_secs_f64() * 1e6 / n as f64,
        cr_fires / ticks
    );
    println!(
        "  ratio schedule/croner = {:.2} (target <= 2.0)",
        ow.as_secs_f64() / cw.as_secs_f64()
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![24_000, 1_000_000]
    } else {
        sizes
    };
    for n in sizes {
        let ticks = if n <= 100_000 { 15 } else { 5 };
        run(n, ticks);
    }
}
