//! A small reader for the `.entry` declarations of a PTX module, so tests can check that each kernel
//! has exactly the parameter list its Rust launch code passes.

/// One kernel parameter: its PTX type (`u64`, `u32`, `s32`, `f32`, `b8`, ...) and array length if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// Type without the dot, e.g. `u64`.
    pub ty: String,
    /// `Some(n)` for `name[n]` (by-value structs), else `None`.
    pub array: Option<usize>,
}

/// One `.entry` (kernel) with its parameters in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// Kernel name (unmangled when declared `extern "C"`).
    pub name: String,
    /// Parameters in order.
    pub params: Vec<PtxParam>,
}

fn parse_param(decl: &str) -> Option<PtxParam> {
    // `.param .u64 name` | `.param .align 8 .b8 name[16]` | `.param .u64 .ptr .global .align 4 name`
    let mut toks = decl.split_whitespace();
    if toks.next()? != ".param" {
        return None;
    }
    let mut ty = None;
    let mut last = "";
    let mut skip_next = false;
    for t in toks {
        if skip_next {
            skip_next = false;
            continue;
        }
        if t == ".align" {
            skip_next = true;
            continue;
        }
        if let Some(x) = t.strip_prefix('.') {
            if ty.is_none() {
                ty = Some(x.to_string());
            }
            continue;
        }
        last = t;
    }
    let array = match (last.find('['), last.find(']')) {
        (Some(a), Some(b)) if b > a => Some(last[a + 1..b].trim().parse().ok()?),
        _ => None,
    };
    Some(PtxParam { ty: ty?, array })
}

/// All `.entry` declarations in `ptx`, in file order. Comments (`//`) are ignored.
pub fn entries(ptx: &str) -> Vec<PtxEntry> {
    let text: String = ptx
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(pos) = rest.find(".entry") {
        let after = &rest[pos + ".entry".len()..];
        let Some(open) = after.find('(') else { break };
        let name = after[..open].trim().to_string();
        let Some(close) = after[open..].find(')') else {
            break;
        };
        let list = &after[open + 1..open + close];
        let params = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .filter_map(parse_param)
            .collect();
        out.push(PtxEntry { name, params });
        rest = &after[open + close..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries() {
        let ptx = "// .entry fake(\n.visible .entry k1(\n\t.param .u64 k1_param_0,\n\t.param .u32 k1_param_1,\n\t.param .align 8 .b8 k1_param_2[16]\n)\n{\n ret;\n}\n.visible .entry k2()\n{\n}\n";
        let e = entries(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "k1");
        let tys: Vec<_> = e[0]
            .params
            .iter()
            .map(|p| (p.ty.as_str(), p.array))
            .collect();
        assert_eq!(tys, vec![("u64", None), ("u32", None), ("b8", Some(16))]);
        assert_eq!(e[1].name, "k2");
        assert!(e[1].params.is_empty());
    }
}
