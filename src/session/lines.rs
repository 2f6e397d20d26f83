//! Reads untrusted line streams (worker events, stdout, stderr) with a bounded buffer: an endless line
//! costs at most `max` bytes of memory and is reported, never a panic. Each line is handed on before the next is
//! read, so a consumer that waits makes the writer wait on its pipe; a consumer that breaks ends the reading.

use std::ops::ControlFlow;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// A line longer than the limit; its bytes were skipped.
    TooLong,
}

pub async fn for_each_line<R: AsyncRead + Unpin, F: Future<Output = ControlFlow<()>>>(
    reader: R,
    max: usize,
    mut on_line: impl FnMut(Line) -> F,
) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = max as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > max {
            if on_line(Line::TooLong).await.is_break()
                || !skip_to_newline(&mut reader, &mut buf).await
            {
                return;
            }
            continue;
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        let line = Line::Text(String::from_utf8_lossy(&buf).into_owned());
        if on_line(line).await.is_break() {
            return;
        }
    }
}

/// Discards the rest of an overlong line; false at end of stream.
async fn skip_to_newline<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> bool {
    loop {
        buf.clear();
        match reader.take(1 << 16).read_until(b'\n', buf).await {
            Ok(0) | Err(_) => return false,
            Ok(_) if buf.last() == Some(&b'\n') => return true,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut out = Vec::new();
        for_each_line(input, max, |l| {
            out.push(l);
            std::future::ready(ControlFlow::Continue(()))
        })
        .await;
        out
    }

    #[tokio::test]
    async fn a_consumer_that_breaks_ends_the_reading() {
        let mut seen = Vec::new();
        for_each_line(&b"a\nstop\nb\n"[..], 10, |l| {
            let stop = l == Line::Text("stop".into());
            seen.push(l);
            std::future::ready(if stop {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })
        .await;
        assert_eq!(seen, [Line::Text("a".into()), Line::Text("stop".into())]);
    }

    #[tokio::test]
    async fn splits_and_bounds_lines() {
        let long = [b'x'; 100];
        let mut input = b"a\r\nbb\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nlast");
        let got = lines(&input, 10).await;
        assert_eq!(
            got,
            vec![
                Line::Text("a".into()),
                Line::Text("bb".into()),
                Line::TooLong,
                Line::Text("last".into())
            ]
        );
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced() {
        assert_eq!(
            lines(b"\xff\xfe\n", 10).await,
            vec![Line::Text("\u{fffd}\u{fffd}".into())]
        );
    }
}
