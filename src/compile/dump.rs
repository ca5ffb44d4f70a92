//! `warden compile --dump`: the program in readable form, stable enough for golden tests.

use std::fmt::Write;

use super::program::*;

fn const_text(c: &Const) -> String {
    match c {
        Const::Bool(b) => b.to_string(),
        Const::Num(n) => n.to_string(),
        Const::Str(s) => format!("{:?}", &**s),
        Const::StrSet(_, items) | Const::List(items) => {
            let inner: Vec<String> = items.iter().map(const_text).collect();
            let (open, close) = if matches!(c, Const::StrSet(..)) {
                ("{", "}")
            } else {
                ("[", "]")
            };
            format!("{open}{}{close}", inner.join(", "))
        }
        Const::Json(v) => v.to_string(),
    }
}

fn path_text(p: &PathSpec) -> String {
    let mut s = match p.root {
        Root::Payload => "payload".to_string(),
        Root::Metadata => "metadata".to_string(),
        Root::Var(v) => format!("var{v}"),
    };
    for seg in &p.segs {
        match seg {
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

fn op_text(program: &Program, op: &Op) -> String {
    let konst = |k: &u32| {
        program
            .consts
            .get(*k as usize)
            .map_or_else(|| "?".into(), const_text)
    };
    let label = |b: &u8| {
        program
            .labels
            .iter()
            .find(|l| l.bit == *b)
            .map_or_else(|| format!("#{b}"), |l| l.name.to_string())
    };
    match op {
        Op::Const(k) => match program.rego_folded.iter().find(|(i, _)| i == k) {
            Some((_, query)) => format!("const      {}   ; folded from Rego {query}", konst(k)),
            None => format!("const      {}", konst(k)),
        },
        Op::Rego(n) => format!(
            "rego       {}",
            program
                .rego_refs
                .get(*n as usize)
                .map_or("?", String::as_str)
        ),
        Op::RegoCall(n, argc) => format!(
            "rego_call  {}/{argc}",
            program
                .rego_refs
                .get(*n as usize)
                .map_or("?", String::as_str)
        ),
        Op::RegoInput(n, argc) => format!(
            "rego_input {}/{argc}",
            program
                .rego_refs
                .get(*n as usize)
                .map_or("?", String::as_str)
        ),
        Op::Path(p) => format!(
            "path       {}",
            program
                .paths
                .get(*p as usize)
                .map_or_else(|| "?".into(), path_text)
        ),
        Op::Member(k) => format!("member     {}", konst(k)),
        Op::Has(b) => format!("has        {}", label(b)),
        Op::TurnsSince(b) => format!("turns_since {}", label(b)),
        Op::EffectState(n) if *n == u32::MAX => "effect_state any".to_string(),
        Op::EffectState(n) => format!(
            "effect_state {}",
            program.effects.get(*n as usize).map_or("?", |e| &*e.name)
        ),
        Op::DerivedFrom(k) => format!("derived_from {}", konst(k)),
        Op::FoundIn(k) => format!("found_in   {}", konst(k)),
        Op::LineageInferred => "lineage_inferred".to_string(),
        Op::ReadAt => "read_at".to_string(),
        Op::TakenFromOrigin(k, all) => format!(
            "{} {}",
            if *all {
                "taken_only_from"
            } else {
                "taken_from"
            },
            konst(k)
        ),
        Op::TakenFromLabel(b, all) => format!(
            "{} {}",
            if *all {
                "taken_only_from"
            } else {
                "taken_from"
            },
            label(b)
        ),
        Op::History(n) => format!("history    slot{n}"),
        Op::HistoryKeyed(n) => format!("history    slot{n} keyed"),
        Op::JumpIfFalse(t) => format!("jump_false @{t}"),
        Op::JumpIfTrue(t) => format!("jump_true  @{t}"),
        Op::IterNext(v, t) => format!("iter_next  var{v} else @{t}"),
        Op::IterStart(u16::MAX) => "iter_start".to_string(),
        Op::IterStart(k) => format!("iter_start key var{k}"),
        Op::Elements => "elements".to_string(),
        Op::Role => "role".to_string(),
        Op::EffectClass => "effect_class".to_string(),
        Op::AskedFor => "requested".to_string(),
        Op::Delegated => "delegated".to_string(),
        Op::RequestedObject => "requested_object".to_string(),
        Op::Requested => "requested_by_user".to_string(),
        Op::Links => "links".to_string(),
        Op::AnyStep(l, d) => format!("any_step   loop @{l} done @{d}"),
        Op::AllStep(l, d) => format!("all_step   loop @{l} done @{d}"),
        Op::IterEnd(any) => format!("iter_end   {}", if *any { "any" } else { "all" }),
        Op::SelectStep(k, l) => format!("select_step key var{k} loop @{l}"),
        Op::SelectEnd => "select_end".to_string(),
        Op::Call(b, n) => format!("call       {b:?}/{n}"),
        Op::IntentPermits(f) => format!(
            "intent_permits{}{}",
            if f & 1 != 0 { " +operation" } else { "" },
            if f & 2 != 0 { " +resource" } else { "" }
        ),
        Op::MakeList(n) => format!("make_list  {n}"),
        Op::MakeObject(k) => format!("make_obj   {}", konst(k)),
        Op::Truthy => "truthy".into(),
        Op::JsonNull => "json_null".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn code_text(out: &mut String, program: &Program, code: &Code, indent: &str) {
    for (i, op) in code.ops.iter().enumerate() {
        let _ = writeln!(out, "{indent}{i:>4}  {}", op_text(program, op));
    }
}

fn decision_text(d: &DecisionTemplate) -> String {
    let mut s = d.kind.as_str().to_string();
    if let Some(c) = &d.code {
        let _ = write!(s, " {c:?}");
    }
    if let Some((k, id)) = &d.approver {
        let _ = write!(s, " approver {} {id:?}", k.as_str());
    }
    if let Some(t) = d.timeout_ms {
        let _ = write!(s, " timeout {t}ms");
    }
    if let Some(k) = d.on_timeout {
        let _ = write!(s, " else {}", k.as_str());
    }
    if let Some(t) = d.expires_ms {
        let _ = write!(s, " expires {t}ms");
    }
    if let Some(scope) = d.extend {
        let _ = write!(s, " extend intent {}", scope.as_str());
    }
    for m in &d.modifications {
        match m {
            ModTemplate::Redact {
                pointer,
                replacement,
            } => {
                let _ = write!(s, " redact {pointer} with {replacement:?}");
            }
            ModTemplate::RedactEach {
                base, replacement, ..
            } => {
                let _ = write!(s, " redact each of {base} with {replacement:?}");
            }
            ModTemplate::Override { argument, .. } => {
                let _ = write!(s, " set {argument}");
            }
            ModTemplate::Replace { .. } => s.push_str(" replace"),
        }
    }
    s
}

/// The whole program as text.
pub fn dump(program: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "; warden program: {} rules, {} labels, {} history slots, {} constants",
        program.rules.len(),
        program.labels.len(),
        program.history.len(),
        program.consts.len()
    );
    out.push_str("\n; labels\n");
    for l in &program.labels {
        let _ = writeln!(
            out,
            "label #{} {}{}",
            l.bit,
            l.name,
            if l.redact { " (redact)" } else { "" }
        );
        if let Some(code) = &l.code {
            code_text(&mut out, program, code, "  ");
        }
    }
    let unknown = program.label_names(program.unknown_labels);
    let _ = writeln!(out, "unknown provenance gets: {{{}}}", unknown.join(", "));
    if !program.history.is_empty() {
        out.push_str("\n; history slots\n");
    }
    for (i, h) in program.history.iter().enumerate() {
        let _ = writeln!(
            out,
            "slot{i} on {} window {:?} keys {}",
            h.hook.name,
            h.window,
            h.key_past.len()
        );
        if let Some(f) = &h.filter {
            out.push_str("  filter:\n");
            code_text(&mut out, program, f, "    ");
        }
        for (n, k) in h.key_past.iter().enumerate() {
            let _ = writeln!(out, "  key {n} (recorded event):");
            code_text(&mut out, program, k, "    ");
        }
    }
    out.push_str("\n; rules\n");
    for r in &program.rules {
        let hooks: Vec<&str> = r.hooks.iter().map(|h| h.name).collect();
        let _ = writeln!(
            out,
            "rule {}.{} on {} => {}",
            r.module,
            r.name,
            hooks.join(", "),
            decision_text(&r.decision)
        );
        code_text(&mut out, program, &r.code, "  ");
    }
    if !program.effects.is_empty() {
        out.push_str("\n; effects\n");
        for e in &program.effects {
            let _ = writeln!(
                out,
                "effect {} for {:?}{}{} ({} key parts)",
                e.name,
                &*e.tool,
                if e.not_executed_on_error {
                    " not_executed_on_error"
                } else {
                    ""
                },
                match (e.lease_turns, e.lease_ms) {
                    (Some(n), _) => format!(" lease {n} turns"),
                    (_, Some(ms)) => format!(" lease {ms}ms"),
                    _ => String::new(),
                },
                e.parts
            );
            code_text(&mut out, program, &e.key, "  ");
        }
    }
    out.push_str("\n; index\n");
    let mut methods: Vec<_> = program.index.iter().collect();
    methods.sort_by_key(|(m, _)| **m);
    for (m, ix) in methods {
        let names = |ids: &[u32]| -> String {
            ids.iter()
                .filter_map(|i| program.rules.get(*i as usize))
                .map(|r| r.name.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "{m}: any tool [{}]", names(&ix.any_tool));
        let mut tools: Vec<_> = ix.by_tool.iter().collect();
        tools.sort_by(|a, b| a.0.cmp(b.0));
        for (t, ids) in tools {
            let _ = writeln!(out, "  tool {t:?}: [{}]", names(ids));
        }
    }
    out.push_str("\n; defaults\n");
    let mut defaults: Vec<_> = program.defaults.iter().collect();
    defaults.sort_by_key(|(k, _)| k.unwrap_or(""));
    for (k, d) in defaults {
        let _ = writeln!(out, "{} => {}", k.unwrap_or("*"), decision_text(d));
    }
    out
}
