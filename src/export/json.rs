//! `json`: one object, `{"header": …, "records": […]}`, a record per line.

use std::io::{self, Write};

use serde_json::Value;

use golow_protocol::event::Record;

pub fn write(
    header: &Value,
    records: impl Iterator<Item = Record>,
    out: &mut impl Write,
) -> io::Result<()> {
    out.write_all(b"{\"header\":")?;
    serde_json::to_writer(&mut *out, header)?;
    out.write_all(b",\"records\":[")?;
    for (i, record) in records.enumerate() {
        // A record per line keeps the file usable with line-oriented tools.
        out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, &record)?;
    }
    out.write_all(b"\n]}\n")
}
