use std::{env, fs, process::ExitCode};

fn main() -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for path in env::args().skip(1) {
        match fs::read_to_string(&path) {
            Ok(text) => {
                let c = wordcount::count(&text);
                println!("{:>7} {:>7} {:>7} {path}", c.lines, c.words, c.bytes);
            }
            Err(e) => {
                eprintln!("wordcount: {path}: {e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}
