//! A small SVG writer: elements with attributes, text escaped, numbers rounded to a tenth
//! of a pixel. Just enough for the sweep's plot, without a plotting dependency.

use std::fmt::Write as _;

/// An attribute's value.
pub enum Value<'a> {
    /// A coordinate or length, written with one decimal.
    Num(f64),
    /// Text, escaped.
    Text(&'a str),
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Num(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}

/// An SVG document being written.
#[derive(Debug)]
pub struct Svg {
    out: String,
}

impl Svg {
    /// A document of `width` × `height` pixels on a white background.
    pub fn new(width: f64, height: f64) -> Svg {
        let mut svg = Svg { out: String::new() };
        let _ = writeln!(svg.out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        let (w, h) = (num(width), num(height));
        let _ = writeln!(
            svg.out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
        );
        svg.element(
            "rect",
            &[
                ("width", width.into()),
                ("height", height.into()),
                ("fill", "white".into()),
            ],
        );
        svg
    }

    /// An empty element, such as `line` or `circle`.
    pub fn element(&mut self, name: &str, attrs: &[(&str, Value<'_>)]) {
        self.open(name, attrs);
        self.out.push_str("/>\n");
    }

    /// An element holding `text`, such as `text` or `title`.
    pub fn text_element(&mut self, name: &str, attrs: &[(&str, Value<'_>)], text: &str) {
        self.open(name, attrs);
        let _ = writeln!(self.out, ">{}</{name}>", escape(text));
    }

    /// Opens a group; [`Svg::end_group`] closes it.
    pub fn group(&mut self, attrs: &[(&str, Value<'_>)]) {
        self.open("g", attrs);
        self.out.push_str(">\n");
    }

    /// Closes the innermost open group.
    pub fn end_group(&mut self) {
        self.out.push_str("</g>\n");
    }

    /// A line from `(x1, y1)` to `(x2, y2)`.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: f64) {
        self.element(
            "line",
            &[
                ("x1", x1.into()),
                ("y1", y1.into()),
                ("x2", x2.into()),
                ("y2", y2.into()),
                ("stroke", stroke.into()),
                ("stroke-width", width.into()),
            ],
        );
    }

    /// Text at `(x, y)`; `anchor` is `start`, `middle` or `end`.
    pub fn text(&mut self, (x, y): (f64, f64), anchor: &str, size: f64, text: &str) {
        self.text_element(
            "text",
            &[
                ("x", x.into()),
                ("y", y.into()),
                ("text-anchor", anchor.into()),
                ("font-size", size.into()),
            ],
            text,
        );
    }

    /// The `points` attribute of a polyline through `points`.
    pub fn points(points: &[(f64, f64)]) -> String {
        points
            .iter()
            .map(|&(x, y)| format!("{},{}", num(x), num(y)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    fn open(&mut self, name: &str, attrs: &[(&str, Value<'_>)]) {
        let _ = write!(self.out, "<{name}");
        for (key, value) in attrs {
            let value = match value {
                Value::Num(v) => num(*v),
                Value::Text(t) => escape(t),
            };
            let _ = write!(self.out, r#" {key}="{value}""#);
        }
    }
}

/// A number with at most one decimal, without a trailing `.0`.
fn num(v: f64) -> String {
    // `+ 0.0` turns -0 into 0.
    let rounded = (v * 10.0).round() / 10.0 + 0.0;
    if rounded == rounded.trunc() {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}

/// `text` safe inside an element or a double-quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_escaped_and_closed() {
        let mut svg = Svg::new(100.0, 50.0);
        svg.text((1.0, 2.25), "start", 12.0, r#"a < b & "c""#);
        svg.group(&[("class", "x".into())]);
        svg.line((0.0, 0.0), (10.04, 3.0), "black", 1.0);
        svg.end_group();
        let text = svg.finish();
        assert!(text.contains(r#"<text x="1" y="2.3" text-anchor="start" font-size="12">a &lt; b &amp; &quot;c&quot;</text>"#), "{text}");
        assert!(text.contains(r#"x2="10""#), "{text}");
        assert!(text.trim_end().ends_with("</svg>"));
        assert_eq!(Svg::points(&[(1.0, 2.0), (3.5, -4.0)]), "1,2 3.5,-4");
        assert_eq!(num(-0.04), "0");
    }
}
