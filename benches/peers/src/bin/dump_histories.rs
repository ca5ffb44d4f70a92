//! Writes the generator's histories (and probes) as JSON Lines, for the Invariant script:
//! `dump_histories DIR` writes DIR/history-H.jsonl, the probe being the last line.

use std::io::Write;

use warden_peers::{history, HS};

fn main() {
    let dir = std::env::args().nth(1).expect("usage: dump_histories DIR");
    std::fs::create_dir_all(&dir).unwrap();
    for h in HS {
        let path = format!("{dir}/history-{h}.jsonl");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for v in history::history(h, history::Taint::Recent)
            .iter()
            .chain([&history::probe(h)])
        {
            serde_json::to_writer(&mut f, v).unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
}
