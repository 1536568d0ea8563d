//! Resident memory of the o200k_base tokenizer alone (the world builds it on the first token
//! count): `cargo run --release --example tokenizer_rss`.

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
    println!("before: {}", rss());
    match tiktoken_rs::o200k_base() {
        Ok(bpe) => {
            let n = bpe.encode_ordinary("fn main() {}").len();
            println!("after building o200k_base ({n} tokens counted): {}", rss());
        }
        Err(e) => {
            eprintln!("tokenizer_rss: cannot build o200k_base: {e}");
            std::process::exit(1);
        }
    }
}
