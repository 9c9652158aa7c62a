//! docs/commands.md lists exactly the commands of the table, with their arity, flags and
//! key range in Redis 7.0 (the default version; the catalog's).

#[test]
fn commands_doc_lists_every_command_of_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/commands.md");
    let doc = std::fs::read_to_string(&path).expect("docs/commands.md");
    let mut listed = std::collections::BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() > 3 {
            if let Some(name) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                listed.insert(
                    name.to_ascii_lowercase(),
                    (cells[2].to_string(), cells[3].to_string(), cells[4].to_string()),
                );
            }
        }
    }
    let mut missing = Vec::new();
    for spec in ferrokv::command::table(ferrokv::command::catalog::ServerVersion::Redis70).all() {
        let flags: Vec<&str> = ferrokv::command::flags::SHOWN
            .iter()
            .filter(|&&f| spec.has(f))
            .map(|&f| ferrokv::command::flags::name(f))
            .collect();
        let want =
            (spec.arity.to_string(), flags.join(" "), format!("{},{},{}", spec.first_key, spec.last_key, spec.step));
        match listed.remove(spec.name) {
            Some(doc) if doc == want => {}
            Some(doc) => missing.push(format!("{}: {want:?} (doc says {doc:?})", spec.name)),
            None => missing.push(format!("{} not listed", spec.name)),
        }
    }
    assert!(missing.is_empty(), "docs/commands.md is out of date: {missing:?}");
    assert!(listed.is_empty(), "docs/commands.md lists commands the engine lacks: {:?}", listed.keys());
}
