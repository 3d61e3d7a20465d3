//! Call ids the hosts make up (rig, the MCP server): unique across processes, not only
//! within one. A `once` tool keyed by the call id (`Once::new()`) looks the id up in a
//! table that outlives the process and is shared with every other process on the same
//! database, so an id made from a counter alone (`rig-1`) would come again after a restart
//! and be answered with an earlier call's record, its work never done.

use std::sync::OnceLock;

/// This process's part of every id it makes: 64 random bits, drawn once.
pub(crate) fn instance() -> &'static str {
    static INSTANCE: OnceLock<String> = OnceLock::new();
    INSTANCE.get_or_init(|| format!("{:016x}", fastrand::u64(..)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_instance_is_drawn_once_and_is_sixteen_hex_digits() {
        let first = super::instance();
        assert_eq!(first, super::instance());
        assert_eq!(first.len(), 16);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    }
}
