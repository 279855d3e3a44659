//! `extract` against the full-parse oracle (`entry::extract_from` over `serde_json::from_slice`):
//! hand-picked documents (escapes, unicode, duplicates, numbers, nesting limits, invalid JSON),
//! generated documents and their corruptions, each under several spec sets.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::{extract, failed, run, Walks};
use crate::entry::{extract_from, Entry, FieldSpec, Fmt, Seg};

const POD: &str = include_str!("../tests/data/pod.json");

fn k(s: &str) -> Seg {
    Seg::Key(s.into())
}

fn spec(fmt: Fmt, paths: &[&[Seg]]) -> FieldSpec {
    FieldSpec { label: String::new(), fmt, paths: paths.iter().map(|p| p.to_vec()).collect() }
}

fn strings(base: &[&str], members: &[&str]) -> Vec<FieldSpec> {
    let path = |m: &str| base.iter().chain([&m]).map(|s| k(s)).collect::<Vec<_>>();
    members.iter().map(|m| spec(Fmt::Str, &[&path(m)])).collect()
}

/// The API server's pod specs (kubecore.apiserver.cache.FIELD_SPECS plus metadata).
fn pod_specs() -> Vec<FieldSpec> {
    let mut specs = strings(&["metadata"], &["name", "namespace"]);
    specs.extend(strings(&["spec"], &["nodeName", "restartPolicy", "schedulerName", "serviceAccountName"]));
    specs.push(spec(Fmt::Bool, &[&[k("spec"), k("hostNetwork")]]));
    specs.push(spec(Fmt::Str, &[&[k("status"), k("phase")]]));
    specs.push(spec(Fmt::Str, &[&[k("status"), k("podIPs"), Seg::Index(0), k("ip")], &[k("status"), k("podIP")]]));
    specs.push(spec(Fmt::Str, &[&[k("status"), k("nominatedNodeName")]]));
    specs
}

/// Every format on every shape of path, including ones no kind uses.
fn odd_specs() -> Vec<FieldSpec> {
    let fmts = [Fmt::Str, Fmt::Int, Fmt::Bool, Fmt::FirstStr];
    let paths: Vec<Vec<Vec<Seg>>> = vec![
        vec![vec![k("a")]],
        vec![vec![k("a"), k("b")]],
        vec![vec![k("a"), Seg::Index(1)]],
        vec![vec![Seg::Index(0)]],
        vec![vec![Seg::Index(0), k("a")]],
        vec![vec![k("metadata"), k("labels")]],
        vec![vec![k("metadata"), k("labels"), k("app")]],
        vec![vec![k("metadata"), k("labels"), k("x")], vec![k("metadata"), k("name")]],
        vec![vec![k("status"), k("podIPs"), Seg::Index(1), k("ip")], vec![k("status"), k("podIPs")], vec![k("status")]],
        vec![vec![k("a"), k("b"), k("c")], vec![k("a"), k("b")], vec![k("a"), Seg::Index(0), k("c")]],
        vec![],
        vec![vec![k("é"), k("\"q\"")]],
        vec![vec![k("")]],
    ];
    fmts.iter().flat_map(|&fmt| paths.iter().map(move |p| FieldSpec { label: String::new(), fmt, paths: p.clone() })).collect()
}

/// Specs whose path may be empty: the whole document is their value (and is built whole).
fn whole_specs() -> Vec<FieldSpec> {
    let mut specs = vec![spec(Fmt::Str, &[&[]]), spec(Fmt::Int, &[&[k("x")], &[]]), spec(Fmt::Bool, &[&[k("x")], &[]])];
    specs.extend(pod_specs());
    specs
}

fn spec_sets() -> Vec<Vec<FieldSpec>> {
    let mut event = strings(&["involvedObject"], &["kind", "namespace", "name", "uid"]);
    event.push(spec(Fmt::FirstStr, &[&[k("source"), k("component")], &[k("reportingComponent")]]));
    vec![vec![], pod_specs(), odd_specs(), whole_specs(), event]
}

/// Each walk against the full parse under every spec set: `extract` (scanner, else serde walk),
/// the serde walk alone, and the scanner alone when it answers. Returns for how many spec sets
/// the scanner answered.
fn check(bytes: &[u8]) -> usize {
    let doc: Option<Value> = serde_json::from_slice(bytes).ok();
    let mut answered = 0;
    for specs in spec_sets() {
        let want = extract_from(doc.as_ref(), &specs);
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(extract(bytes, &specs), want, "{text}");
        assert_eq!(run(bytes, &specs, Walks::Serde).unwrap_or_else(|| failed(&specs)), want, "serde walk: {text}");
        if let Some(got) = run(bytes, &specs, Walks::Fast) {
            assert!(doc.is_some(), "the scanner answered for an invalid document: {text}");
            assert_eq!(got, want, "scanner: {text}");
            answered += 1;
        }
    }
    answered
}

#[test]
fn hand_picked_documents_match_the_full_parse() {
    let deep = |n: usize, inner: &str| format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
    let mut docs: Vec<String> = [
        POD,
        r#"{"metadata":{"labels":{"b":"2","a":"1","n":3,"z":null,"o":{},"l":[]}}}"#,
        r#"{"metadata":{"labels":{"a":"1","a":2}}}"#,
        r#"{"metadata":{"labels":{"a":2,"a":"1"}}}"#,
        r#"{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}"#,
        r#"{"metadata":{"labels":{"a":"1"}},"metadata":{"name":"n"}}"#,
        r#"{"metadata":{"labels":{"a":"1"},"labels":5}}"#,
        r#"{"metadata":{"labels":[{"a":"1"}]}}"#,
        r#"{"metadata":[1]}"#,
        r#"{"metadata":"x","spec":{"nodeName":"n"}}"#,
        r#"{"met\u0061data":{"lab\u0065ls":{"k\"ey\\/\n":"v\u00e9\ud83d\ude00\t","\u0000":"nul"}}}"#,
        r#"{"metadata":{"labels":{"ключ":"значение","🙂":"日本"}}}"#,
        r#"{"spec":{"nodeN\u0061me":"n\"1"},"status":{"phase":"\u0050ending"}}"#,
        r#"{"status":{"podIPs":[{"ip":"a"},{"ip":"b"}],"podIP":"c"}}"#,
        r#"{"status":{"podIPs":[],"podIP":"c"}}"#,
        r#"{"status":{"podIPs":[1,{"ip":"b"}],"podIP":"c"}}"#,
        r#"{"status":{"podIPs":{"0":{"ip":"a"}},"podIP":"c"}}"#,
        r#"{"status":{"podIPs":[{"ip":"a"}]},"status":{"podIP":"c"}}"#,
        r#"{"status":{"podIPs":[{"ip":"a"}],"podIPs":null,"podIP":{"z":1,"a":[1.5,-0,1e2,null,true]}}}"#,
        r#"{"a":{"b":{"c":1}},"a":{"b":2}}"#,
        r#"{"a":[{"c":1},{"c":2}],"x":1}"#,
        r#"{"a":{"b":1}}"#,
        r#"{"a":{"b":-1}}"#,
        r#"{"a":{"b":18446744073709551615}}"#,
        r#"{"a":{"b":-9223372036854775808}}"#,
        r#"{"a":{"b":1.0}}"#,
        r#"{"a":{"b":-0}}"#,
        r#"{"a":{"b":-0.0}}"#,
        r#"{"a":{"b":1e300}}"#,
        r#"{"a":{"b":1E-400}}"#,
        r#"{"a":{"b":123456789012345678901234567890}}"#,
        r#"{"a":{"b":true},"x":false}"#,
        r#"{"a":{"b":null}}"#,
        r#"{"a":{"b":"s"}}"#,
        r#"{"a":{"b":{"z":"1","a":{"y":[],"b":{}}}}}"#,
        r#"{"a":{"b":[3,"x",{"q":null}]}}"#,
        r#"{"a":[0,{"c":"x"}],"é":{"\"q\"":"quoted"},"":"empty"}"#,
        r#"  {  "a" : { "b" : "spaced" } , "x" : [ 1 , 2 ] }  "#,
        r#"{"x":"s","x":3}"#,
        r#"{}"#,
        r#"{"metadata":{}}"#,
        // Not objects.
        "[]",
        r#"[{"a":1}]"#,
        r#"[1,[2]]"#,
        "1",
        r#""s""#,
        "null",
        "true",
        "",
        "   ",
        // Invalid.
        "not json",
        r#"{"metadata":{"name":"a"}"#,
        r#"{"metadata":{"name":"a"}},"#,
        r#"{"metadata":{"name":"a"}} x"#,
        r#"{"metadata":{"name":"a",}}"#,
        r#"{"metadata":{"name":"a"},}"#,
        r#"{"metadata":{"name":'a'}}"#,
        r#"{"metadata":{"name":"a	tab"}}"#,
        r#"{"metadata":{"name":"\x"}}"#,
        r#"{"metadata":{"name":"a"},"m":"\ud800"}"#,
        r#"{"metadata":{"name":"a"},"m":"\udc00x"}"#,
        r#"{"metadata":{"name":"a"},"\ud800":1}"#,
        r#"{"metadata":{"name":"a"},"m":"\u12"}"#,
        r#"{"metadata":{"name":"a"},"n":1e999}"#,
        r#"{"metadata":{"name":"a"},"n":-1e400}"#,
        r#"{"metadata":{"name":"a"},"n":01}"#,
        r#"{"metadata":{"name":"a"},"n":1.}"#,
        r#"{"metadata":{"name":"a"},"n":-}"#,
        r#"{"metadata":{"name":"a"},"n":nul}"#,
        r#"{"metadata":{"name":"a"},"n":NaN}"#,
        r#"{"metadata":{"name":"a"} "spec":{}}"#,
        r#"{"metadata" {"name":"a"}}"#,
        r#"{1:2}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    docs.push(format!("{{\"a\":{{\"b\":1{}}}}}", "0".repeat(400)));
    for depth in [120, 125, 126, 127, 128, 129, 200] {
        docs.push(format!(r#"{{"metadata":{{"labels":{{"a":"1"}},"managedFields":{}}},"spec":{{"nodeName":"n"}}}}"#, deep(depth, "1")));
        docs.push(format!(r#"{{"a":{{"b":{}}}}}"#, deep(depth, "")));
        docs.push(format!(r#"{{"a":[{}]}}"#, deep(depth, r#"{"c":1}"#)));
        docs.push(deep(depth, ""));
    }
    for doc in &docs {
        check(doc.as_bytes());
    }
    for bad in [&b"{\"metadata\":{\"name\":\"\xff\"}}"[..], b"{\"metadata\":{\"name\":\"a\"}}\xff", b"{\"a\":{\"b\":\"\xc3\"}}", b"\xef\xbb\xbf{}"] {
        check(bad);
    }
}

#[test]
fn the_pod_example_gives_what_the_full_parse_gives() {
    let (labels, fields) = extract(POD.as_bytes(), &pod_specs());
    assert!(labels.is_empty());
    assert_eq!(fields, ["pod-0", "measured", "", "Always", "default-scheduler", "default", "false", "Pending", "", ""]);
    check(POD.as_bytes());
}

/// The pod example once bound and running: labels, node, IPs, conditions.
fn running_pod() -> String {
    let mut doc: Value = serde_json::from_str(POD).unwrap();
    doc["metadata"]["labels"] = serde_json::json!({"app": "web", "tier": "front\"end", "pod-template-hash": "5d8f"});
    doc["spec"]["nodeName"] = "node-17".into();
    doc["status"] = serde_json::json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-03T10:29:53Z"}],
        "hostIP": "10.0.0.17", "podIP": "10.244.3.9", "podIPs": [{"ip": "10.244.3.9"}],
        "startTime": "2026-12-03T10:29:52Z", "qosClass": "Guaranteed",
    });
    let mut out = String::from(r#"{"metadata":"#);
    out.push_str(&doc["metadata"].to_string());
    for (k, v) in doc.as_object().unwrap().iter().filter(|(k, _)| *k != "metadata") {
        out.push_str(&format!(",{}:{v}", Value::from(k.as_str())));
    }
    out.push('}');
    out
}

#[test]
fn the_scanner_answers_for_stored_pods() {
    let all = spec_sets().len();
    assert_eq!(check(POD.as_bytes()), all, "the pod example");
    let running = running_pod();
    assert_eq!(check(running.as_bytes()), all, "{running}");
    let (labels, fields) = run(running.as_bytes(), &pod_specs(), Walks::Fast).expect("the scanner answers");
    let pairs = [("app", "web"), ("pod-template-hash", "5d8f"), ("tier", "front\"end")];
    assert_eq!(labels, pairs.map(|(k, v)| (k.to_owned(), v.to_owned())));
    assert_eq!(fields, ["pod-0", "measured", "node-17", "Always", "default-scheduler", "default", "false", "Running", "10.244.3.9", ""]);
    // Pretty-printed (every kind of whitespace between tokens) and with a large managedFields.
    let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(&running).unwrap()).unwrap();
    assert_eq!(check(pretty.replace("  ", "\t").replace('\n', "\r\n").as_bytes()), all);
    let entry = r#"{"manager":"m","operation":"Update","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:n":[1,-2.5,0,true,false,null,"k:{\"a\":1}"]}}"#;
    let big = POD.replacen(r#""managedFields":["#, &format!(r#""managedFields":[{},"#, vec![entry; 500].join(",")), 1);
    assert_eq!(check(big.as_bytes()), all);
}

/// Each document with its expected scanner outcome: true = answers under every spec set, false =
/// declines under every one (and the serde walk decides).
#[test]
fn the_scanner_answers_or_declines_as_documented() {
    let all = spec_sets().len();
    let deep = |n: usize| format!(r#"{{"metadata":{{"name":"a","managedFields":{}1{}}},"spec":{{"nodeName":"n"}}}}"#, "[".repeat(n), "]".repeat(n));
    let digits = |n: usize| format!(r#"{{"metadata":{{"name":"a","managedFields":[{}]}}}}"#, "9".repeat(n));
    let mut cases: Vec<(String, bool)> = [
        // Exponents and long numbers off the plan: serde_json checks their range.
        (r#"{"metadata":{"name":"a","managedFields":[{"f":1e5,"g":-2.5E-3,"h":1E+2,"i":1e-400}]}}"#, true),
        (r#"{"metadata":{"name":"a","managedFields":[{"h":1e999}]}}"#, false),
        (r#"{"metadata":{"name":"a","managedFields":[-1e400]}}"#, false),
        // Numbers: -0, fractions, beyond u64, leading zeros and other grammar errors.
        (r#"{"metadata":{"name":"a","x":[-0,1.5,-0.0,12345678901234567890,-9223372036854775809,0.000001]}}"#, true),
        (r#"{"metadata":{"name":"a","x":[01]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[1.]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[.5]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[+1]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[1e]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[1e+]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[-]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[1.5.5]}}"#, false),
        (r#"{"metadata":{"name":"a","x":[--1]}}"#, false),
        // Escapes: simple ones here, \u by serde_json (pairs fine, lone surrogates and bad hex not).
        (r#"{"metadata":{"name":"\"q\\/\/\b\f\n\r\t","labels":{"k\"":"v\n"},"x":"\"\\"}}"#, true),
        (r#"{"metadata":{"name":"a\u00e9","labels":{"k\u0065y":"v\ud83d\ude00"},"x":"\u0000"},"sp\u0065c":{"nodeName":"\u006e1"}}"#, true),
        (r#"{"metadata":{"name":"a","x":"\ud800"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\udc00"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\ud83d\u0041"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\u12"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\uZZZZ"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\u"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\x"}}"#, false),
        (r#"{"metadata":{"name":"a","x":"\"}}"#, false),
        (r#"{"metadata":{"labels":{"\ud800":"v"}}}"#, false),
        (r#"{"metadata":{"labels":{"k":"\ud800"}}}"#, false),
        // Control characters, raw; DEL and non-ASCII are fine.
        ("{\"metadata\":{\"name\":\"a\u{1}\"}}", false),
        ("{\"metadata\":{\"name\":\"a\",\"x\":\"\n\"}}", false),
        ("{\"metadata\":{\"name\":\"a\",\"x\":\"\u{1f}\"}}", false),
        ("{\"metadata\":{\"labels\":{\"k\\t\":\"\u{7f}é🙂\"}}}", true),
        // Duplicates: on the plan the serde walk settles them; labels and off-plan ones are fine.
        (r#"{"metadata":{"labels":{"a":"1","a":2,"b":3,"b":"4"}}}"#, true),
        (r#"{"metadata":{"uid":"1","uid":"2","managedFields":[{"a":1,"a":2}]},"zz":1,"zz":2}"#, true),
        // Structure.
        (r#"{"metadata":{"name":"a",}}"#, false),
        (r#"{"metadata":{"name":"a"},}"#, false),
        (r#"{"metadata":{"x":[1,]}}"#, false),
        (r#"{"metadata":{"x":[,1]}}"#, false),
        (r#"{"metadata":{"name" "a"}}"#, false),
        (r#"{"metadata":{"name":"a"} "spec":{}}"#, false),
        (r#"{"metadata":{"x":nul}}"#, false),
        (r#"{"metadata":{"x":truex}}"#, false),
        (r#"{"metadata":{"x":{1:2}}}"#, false),
        (r#"{"metadata":{}} x"#, false),
        (r#"{"metadata":{}}}"#, false),
        ("{\"metadata\":{}} \t\r\n", true),
        (r#"{"metadata":{}"#, false),
    ]
    .iter()
    .map(|&(d, fast)| (d.to_owned(), fast))
    .collect();
    // Nesting: the scanner's limit is 100 containers (serde_json's 128).
    cases.extend([(deep(97), true), (deep(98), true), (deep(99), false), (deep(126), false), (deep(127), false)]);
    // Numbers without exponent: up to 64 bytes here, longer ones by serde_json (f64 range).
    cases.extend([(digits(64), true), (digits(65), true), (digits(308), true), (digits(309), false), (digits(400), false)]);
    // Every prefix of the pod example is truncated: the serde walk decides.
    let pod = POD.trim_end();
    cases.extend((0..pod.len()).map(|n| (pod[..n].to_owned(), false)));
    for (doc, fast) in &cases {
        assert_eq!(check(doc.as_bytes()), if *fast { all } else { 0 }, "{doc}");
    }
    // A member repeated on the plan of some spec sets only (not where the whole document is a
    // spec's value, built by serde_json): declined under those.
    for twice in [
        r#"{"metadata":{"name":"a","name":"b"}}"#,
        r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
        r#"{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}"#,
    ] {
        assert!((1..all).contains(&check(twice.as_bytes())), "{twice}");
    }
}

/// Every byte of the running pod deleted, repeated, or replaced by a JSON-significant byte.
#[test]
fn corruptions_of_a_running_pod_match_the_full_parse() {
    let pod = running_pod().into_bytes();
    let (mut answered, mut declined) = (0, 0);
    for at in 0..pod.len() {
        let mut variants = vec![pod.clone(), pod.clone(), pod.clone()];
        variants[0].remove(at);
        variants[1].insert(at, pod[at]);
        let bytes = b"{}[],:\"\\ 0e-\x01\xff";
        variants[2][at] = bytes[at % bytes.len()];
        for bytes in variants {
            match check(&bytes) {
                0 => declined += 1,
                _ => answered += 1,
            }
        }
    }
    assert!(answered > 100 && declined > 1000, "answered {answered}, declined {declined}");
}

/// A deterministic generator (xorshift) of documents over a small vocabulary, so that the
/// paths of the specs are hit, missed, duplicated and given every kind of value.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn value(&mut self, depth: usize, out: &mut String) {
        let kind = if depth > 4 { self.below(6) } else { self.below(9) };
        match kind {
            0 => out.push_str(self.pick(&["null", "true", "false"])),
            1 => out.push_str(self.pick(&["0", "-1", "7", "3.5", "-0", "1e3", "2E-2", "18446744073709551616", "1e400"])),
            2..=5 => {
                let s = self.pick(&["n1", "", "Pending", "\\\"q\\\"", "\\u00e9", "é", "🙂", "\\ud83d\\ude00", "\\ud800", "a\\nb", "10.0.0.1"]);
                out.push('"');
                out.push_str(s);
                out.push('"');
            }
            6 => {
                out.push('[');
                for i in 0..self.below(4) {
                    if i > 0 {
                        out.push(',');
                    }
                    self.value(depth + 1, out);
                }
                out.push(']');
            }
            _ => self.object(depth + 1, out),
        }
    }

    fn object(&mut self, depth: usize, out: &mut String) {
        const KEYS: &[&str] = &[
            "metadata", "labels", "name", "namespace", "spec", "nodeName", "hostNetwork", "status", "phase", "podIPs", "ip", "podIP", "a", "b", "c", "app", "x",
            "met\\u0061data", "\\u0061", "é",
        ];
        out.push('{');
        for i in 0..self.below(5) {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(self.pick(KEYS));
            out.push_str("\":");
            self.value(depth, out);
        }
        out.push('}');
    }

    /// One byte deleted, duplicated or replaced by a JSON-significant one.
    fn corrupt(&mut self, doc: &str) -> Vec<u8> {
        let mut bytes = doc.as_bytes().to_vec();
        if bytes.is_empty() {
            return bytes;
        }
        let at = self.below(bytes.len());
        match self.below(3) {
            0 => drop(bytes.remove(at)),
            1 => bytes.insert(at, bytes[at]),
            _ => bytes[at] = *b"{}[],:\"\\ 0e-\xff".get(self.below(15)).unwrap_or(&b'x'),
        }
        bytes
    }
}

#[test]
fn generated_documents_and_their_corruptions_match_the_full_parse() {
    let mut gen = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut valid, mut invalid, mut answered) = (0, 0, 0);
    for _ in 0..3000 {
        let mut doc = String::from("{\"metadata\":");
        gen.object(1, &mut doc);
        doc.push(',');
        let rest = {
            let mut o = String::new();
            gen.object(0, &mut o);
            o
        };
        doc.push_str(if rest.len() > 2 { &rest[1..] } else { "\"z\":0}" });
        for bytes in [doc.clone().into_bytes(), gen.corrupt(&doc)] {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(_) => valid += 1,
                Err(_) => invalid += 1,
            }
            answered += check(&bytes);
        }
    }
    // Both sides of the validity line were exercised, and the scanner answered often.
    assert!(valid > 1000 && invalid > 1000, "valid {valid}, invalid {invalid}");
    let runs = valid * spec_sets().len();
    assert!(answered > runs / 2 && runs - answered > 500, "valid runs {runs}, scanner answered {answered}");
}

/// Per-call time (median of 31 rounds) of the full-parse extraction (what `Entry::new` did
/// before `extract`) and of `Entry::new` on the pod example with the pod specs. Run with
/// `cargo test --release -p kubecore-watchcache -- --ignored --nocapture entry_new_timing`.
#[test]
#[ignore]
fn entry_new_timing() {
    let specs = pod_specs();
    let bytes: Arc<[u8]> = Arc::from(POD.as_bytes());
    let key: Arc<[u8]> = Arc::from(&b"/registry/pods/measured/pod-0"[..]);
    let full = || {
        let doc: Option<Value> = serde_json::from_slice(&bytes).ok();
        extract_from(doc.as_ref(), &specs).1.len()
    };
    let lazy = || Entry::new(key.clone(), bytes.clone(), 2, &specs).field(0).len();
    let entry = Entry::new(key.clone(), bytes.clone(), 2, &specs);
    let (_, want) = extract_from(serde_json::from_slice::<Value>(&bytes).ok().as_ref(), &specs);
    assert_eq!((0..specs.len()).map(|i| entry.field(i)).collect::<Vec<_>>(), want, "both sides compute the same entry");
    let (bytes, specs) = (&bytes, &specs);
    let walk = |walks| move || run(bytes, specs, walks).map_or(0, |e| e.1.len());
    let (full_ns, lazy_ns) = (median_ns(full), median_ns(lazy));
    let (scan_ns, serde_ns) = (median_ns(walk(Walks::Fast)), median_ns(walk(Walks::Serde)));
    println!("Entry::new on the pod example ({} bytes): full parse {full_ns:.0} ns, lazy {lazy_ns:.0} ns", POD.len());
    println!("extract alone: scanner {scan_ns:.0} ns, serde walk {serde_ns:.0} ns");
}

fn median_ns(mut f: impl FnMut() -> usize) -> f64 {
    const CALLS: u32 = 20_000;
    let mut rounds: Vec<f64> = (0..31)
        .map(|_| {
            let start = Instant::now();
            let sink: usize = (0..CALLS).map(|_| f()).sum();
            std::hint::black_box(sink);
            start.elapsed().as_nanos() as f64 / f64::from(CALLS)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}
