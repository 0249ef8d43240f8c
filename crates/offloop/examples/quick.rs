use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use offloop::{Exporter, ExporterConfig, HashAlgorithm};
use std::time::Instant;
fn main() {
    let mut rows = String::from("[");
    for r in 0..200 {
        if r > 0 {
            rows.push(',');
        }
        rows.push_str(&format!(r#"{{"id":{r},"email":"user{r}@example.com","name":"User Number {r} with a longer name","score":{},"active":{},"created_at":"2024-01-01T00:00:00.000Z","meta":{{"k":"v","n":[1,2,3]}},"note":null}}"#, r as f64 * 1.37, r % 2 == 0));
    }
    rows.push(']');
    let output = format!(r#"{{"command":"SELECT","rowCount":200,"rows":{rows}}}"#);
    println!("output bytes {}", output.len());
    let input = r#"{"text":"SELECT * FROM users WHERE org_id = $1 LIMIT 200","values":[42]}"#;
    for algo in [HashAlgorithm::Blake3, HashAlgorithm::Sha256] {
        // payload only
        let t = Instant::now();
        let n = 2000;
        for _ in 0..n {
            offloop::hash_payload(output.as_bytes(), None, algo).unwrap();
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "{algo}: payload {:.1} us/span, {:.0} MB/s",
            el / n as f64 * 1e6,
            output.len() as f64 * n as f64 / el / 1e6
        );
        let t = Instant::now();
        for _ in 0..n {
            let _: serde_json::Value = serde_json::from_str(&output).unwrap();
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "serde Value parse: {:.1} us/span, {:.0} MB/s",
            el / n as f64 * 1e6,
            output.len() as f64 * n as f64 / el / 1e6
        );
        let ids: Vec<(String, String)> = (0..512)
            .map(|i| (format!("{:032x}", i / 20 + 1), format!("{:016x}", i + 1)))
            .collect();
        let mut w = BatchWriter::new();
        for (t, s) in &ids {
            w.push(&SpanFrame {
                trace_id: t,
                span_id: s,
                parent_span_id: "",
                kind: 2,
                status_code: 1,
                start: (1.7e9, 0),
                duration: (0.0, 1000),
                name: "pg.query",
                status_message: "",
                scope_name: "x",
                attrs: vec![
                    ("td.inputValue", AttrValue::Str(input.as_bytes())),
                    ("td.outputValue", AttrValue::Str(output.as_bytes())),
                    (
                        "td.inputSchemaMerges",
                        AttrValue::Str(br#"{"values":{"matchImportance":0}}"#),
                    ),
                ],
            });
        }
        let batch = w.finish();
        let dir = std::env::temp_dir().join(format!("offloop-quick-{algo}"));
        let _ = std::fs::remove_dir_all(&dir);
        let e = Exporter::new(ExporterConfig {
            directory: Some(dir.clone()),
            hash: algo,
            ..Default::default()
        })
        .unwrap();
        let t = Instant::now();
        for _ in 0..4 {
            e.export(&batch).unwrap();
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "{algo}: end-to-end {:.0} spans/s ({:.1} ms per 512 batch)",
            2048.0 / el,
            el / 4.0 * 1e3
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
