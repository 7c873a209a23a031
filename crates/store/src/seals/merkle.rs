//! The Merkle tree of a seal's leaves, as RFC 6962 (Certificate Transparency) defines it: the
//! root, an audit path, and the root an audit path leads to. Pure hashing; it knows nothing of
//! what a leaf means or where leaves are kept.

use sha2::{Digest, Sha256};

use crate::chain::Link;

/// `SHA-256(0x00 ‖ leaf)`: a leaf's hash, apart from any node's by its first byte.
pub fn leaf_hash(leaf: &[u8]) -> Link {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(leaf);
    hasher.finalize().into()
}

/// `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Link, right: &Link) -> Link {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The largest power of two smaller than `n` (n ≥ 2).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// The root over leaves given by their hashes (`MTH`); the empty tree's root is SHA-256 of
/// nothing.
pub fn root(hashes: &[Link]) -> Link {
    match hashes.len() {
        0 => Sha256::digest([]).into(),
        1 => hashes[0],
        n => {
            let k = split(n);
            node_hash(&root(&hashes[..k]), &root(&hashes[k..]))
        }
    }
}

/// The audit path of leaf `index` (`PATH(m, D[n])`): the sibling hashes from the leaf up.
pub fn audit_path(index: usize, hashes: &[Link]) -> Vec<Link> {
    let n = hashes.len();
    if n <= 1 || index >= n {
        return Vec::new();
    }
    let k = split(n);
    if index < k {
        let mut path = audit_path(index, &hashes[..k]);
        path.push(root(&hashes[k..]));
        path
    } else {
        let mut path = audit_path(index - k, &hashes[k..]);
        path.push(root(&hashes[..k]));
        path
    }
}

/// The root that leaf `index` of a tree of `size` leaves, hashing to `leaf`, leads to along
/// `path` (RFC 9162, 2.1.3.2); `None` when the path cannot belong to such a tree.
pub fn root_from_path(index: u64, size: u64, leaf: Link, path: &[Link]) -> Option<Link> {
    if index >= size {
        return None;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = leaf;
    for p in path {
        if s == 0 {
            return None;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    (s == 0).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn hex(link: &Link) -> String {
        link.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The test vectors of Certificate Transparency's Merkle tree tests.
    const LEAVES: [&str; 8] = [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ];
    const ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    fn hashes() -> Vec<Link> {
        LEAVES.iter().map(|l| leaf_hash(&unhex(l))).collect()
    }

    #[test]
    fn roots_match_the_known_vectors() {
        let hashes = hashes();
        for (n, expected) in ROOTS.iter().enumerate() {
            assert_eq!(hex(&root(&hashes[..=n])), *expected, "{} leaves", n + 1);
        }
        assert_eq!(
            hex(&root(&[])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn every_audit_path_leads_to_the_root_and_a_wrong_one_does_not() {
        let hashes = hashes();
        for size in 1..=hashes.len() {
            let tree = &hashes[..size];
            let expected = root(tree);
            for index in 0..size {
                let path = audit_path(index, tree);
                let got = root_from_path(index as u64, size as u64, tree[index], &path);
                assert_eq!(got, Some(expected), "leaf {index} of {size}");
                if size > 1 {
                    let other = (index + 1) % size;
                    let wrong = root_from_path(other as u64, size as u64, tree[index], &path);
                    assert_ne!(wrong, Some(expected), "leaf {index} of {size} as {other}");
                }
            }
        }
        assert_eq!(root_from_path(3, 3, hashes[0], &[]), None);
    }
}
