//! Path globs: `*` and `?` within one `/`-segment, `**` as a whole segment for any
//! number of segments (none included). Dynamic programming, so no pattern is slow.

/// Whether `path` matches `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    // ok[i][j]: pat[i..] matches segs[j..].
    let mut ok = vec![vec![false; segs.len() + 1]; pat.len() + 1];
    ok[pat.len()][segs.len()] = true;
    for i in (0..pat.len()).rev() {
        for j in (0..=segs.len()).rev() {
            ok[i][j] = if pat[i] == "**" {
                ok[i + 1][j] || (j < segs.len() && ok[i][j + 1])
            } else {
                j < segs.len() && ok[i + 1][j + 1] && segment(pat[i], segs[j])
            };
        }
    }
    ok[0][0]
}

/// One segment: `*` any run of characters, `?` one character.
fn segment(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let mut ok = vec![vec![false; t.len() + 1]; p.len() + 1];
    ok[p.len()][t.len()] = true;
    for i in (0..p.len()).rev() {
        for j in (0..=t.len()).rev() {
            ok[i][j] = match p[i] {
                '*' => ok[i + 1][j] || (j < t.len() && ok[i][j + 1]),
                '?' => j < t.len() && ok[i + 1][j + 1],
                c => j < t.len() && t[j] == c && ok[i + 1][j + 1],
            };
        }
    }
    ok[0][0]
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn star_stays_in_a_segment_and_double_star_crosses_them() {
        let yes = [
            ("infra/*", "infra/vpc"),
            ("kubernetes/**", "kubernetes/nginx/ingress"),
            ("kubernetes/**", "kubernetes/a"),
            ("kubernetes/**", "kubernetes"),
            ("*/app", "x/app"),
            ("**/app", "x/y/app"),
            ("**", "a/b/c"),
            ("v?c", "vpc"),
            ("*-proj", "b-proj"),
            ("a/**/z", "a/z"),
            ("a/**/z", "a/b/c/z"),
        ];
        let no = [
            ("infra/*", "infra/aws/vpc"),
            ("kubernetes/**", "kube/a"),
            ("*/app", "x/y/app"),
            ("v?c", "vpcc"),
            ("a/**/z", "a/b/c/y"),
        ];
        for (pattern, path) in yes {
            assert!(matches(pattern, path), "{pattern} {path}");
        }
        for (pattern, path) in no {
            assert!(!matches(pattern, path), "{pattern} {path}");
        }
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "**/".repeat(40) + &"*a".repeat(40);
        let path = ["x"; 60].join("/");
        assert!(!matches(&pattern, &path));
    }
}
