//! Resident memory of the o200k_base token counter the world builds on its first count, and of
//! tiktoken-rs's own `CoreBPE` for comparison: `cargo run --release --example tokenizer_rss`.
//! The counter is measured first, in a fresh process, so neither sees the other's heap.

fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() {
    let sample = "fn main() { println!(\"hello world\"); }";
    println!("before: {}", rss());
    match worldfs::world::tokens::count_uncached(sample.as_bytes()) {
        Ok(n) => println!("after worldfs's counter ({n} tokens counted): {}", rss()),
        Err(e) => {
            eprintln!("tokenizer_rss: {e}");
            std::process::exit(1);
        }
    }
    match tiktoken_rs::o200k_base() {
        Ok(bpe) => {
            let n = bpe.encode_ordinary(sample).len();
            println!(
                "after also building tiktoken-rs's CoreBPE ({n} tokens counted): {}",
                rss()
            );
        }
        Err(e) => {
            eprintln!("tokenizer_rss: cannot build o200k_base: {e}");
            std::process::exit(1);
        }
    }
}
