//! The seccomp filter every sandboxed agent process runs under: it refuses new user namespaces
//! (`unshare` or `clone` with `CLONE_NEWUSER`, and `clone3`, whose flags a filter cannot read),
//! which would otherwise hand an agent a namespace where it holds every capability, and with it
//! the kernel's attack surface that is normally kept for root. bubblewrap's own
//! `--disable-userns` needs `--unshare-user`, which under a root server would map the agent to
//! root outside the sandbox (`docs/decisions/0029-agent-uids.md`).
//!
//! This module only builds the filter's bytes (classic BPF, as `bwrap --seccomp FD` reads
//! them); `sandbox/` hands them to bubblewrap, which installs the filter just before it runs
//! the agent. It never installs anything in the server itself.

/// `struct seccomp_data`: the syscall number, then the architecture, then the arguments.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of the first argument on a little-endian machine (the flags of `unshare`
/// and `clone`; every flag tested lies in them).
const ARG0_LOW: u32 = 16;

const CLONE_NEWUSER: u32 = 0x1000_0000;
const CLONE3: u32 = 435;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;
/// What `clone3` answers: the C library then falls back to `clone`, whose flags are checked.
const ENOSYS: u32 = 38;

// Classic BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// One architecture a process of this machine can make system calls with.
struct Abi {
    audit_arch: u32,
    unshare: u32,
    clone: u32,
    /// Syscall numbers at or above this are refused outright (x86_64's x32 ABI, whose numbers
    /// carry bit 30 and would otherwise slip past the checks).
    refused_from: Option<u32>,
}

/// The machine's own ABI first, then the compatibility ABI its kernel may also accept.
#[cfg(target_arch = "x86_64")]
const ABIS: Option<[Abi; 2]> = Some([
    Abi {
        audit_arch: 0xc000_003e,
        unshare: 272,
        clone: 56,
        refused_from: Some(0x4000_0000),
    },
    // i386 through `int 0x80`.
    Abi {
        audit_arch: 0x4000_0003,
        unshare: 310,
        clone: 120,
        refused_from: None,
    },
]);

#[cfg(target_arch = "aarch64")]
const ABIS: Option<[Abi; 2]> = Some([
    Abi {
        audit_arch: 0xc000_00b7,
        unshare: 97,
        clone: 220,
        refused_from: None,
    },
    // 32-bit ARM, where the kernel runs it.
    Abi {
        audit_arch: 0x4000_0028,
        unshare: 337,
        clone: 120,
        refused_from: None,
    },
]);

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ABIS: Option<[Abi; 2]> = None;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// The instructions: per ABI, its syscalls checked; an architecture the filter does not know
/// is refused whole (no process of this machine makes such calls).
fn program(abis: &[Abi]) -> Vec<Insn> {
    // Each ABI's block, built first so that the dispatch knows where each starts.
    let blocks: Vec<Vec<Insn>> = abis.iter().map(block).collect();
    let mut out = vec![stmt(LD_W_ABS, ARCH)];
    // Dispatch: one JEQ per ABI, then the refusal of unknown architectures; the blocks follow.
    let dispatch_len = abis.len() + 1;
    let mut offset = 0usize;
    for (i, (abi, block)) in abis.iter().zip(&blocks).enumerate() {
        // From the instruction after this JEQ to the start of its block.
        let to_block = dispatch_len - (i + 1) + offset;
        out.push(jump(JEQ_K, abi.audit_arch, to_u8(to_block), 0));
        offset += block.len();
    }
    out.push(stmt(RET_K, RET_ERRNO | EPERM));
    for block in blocks {
        out.extend(block);
    }
    out
}

/// One ABI's checks: the syscall number loaded, `clone3` refused with ENOSYS, `unshare` and
/// `clone` refused with EPERM when their flags ask for a user namespace; everything else
/// allowed.
fn block(abi: &Abi) -> Vec<Insn> {
    let mut out = vec![stmt(LD_W_ABS, NR)];
    if let Some(from) = abi.refused_from {
        // Skip the refusal below unless the number is that high.
        out.push(jump(JGE_K, from, 0, 1));
        out.push(stmt(RET_K, RET_ERRNO | ENOSYS));
    }
    // The rest, in order (offsets count from the next instruction):
    //   JEQ clone3   → RET ENOSYS (+3)
    //   JEQ unshare  → flags check (+3)
    //   JEQ clone    → flags check (+2), else RET ALLOW (+0)
    //   RET ALLOW
    //   RET ENOSYS
    //   LD arg0; JSET NEWUSER → RET EPERM, else RET ALLOW
    out.extend([
        jump(JEQ_K, CLONE3, 3, 0),
        jump(JEQ_K, abi.unshare, 3, 0),
        jump(JEQ_K, abi.clone, 2, 0),
        stmt(RET_K, RET_ALLOW),
        stmt(RET_K, RET_ERRNO | ENOSYS),
        stmt(LD_W_ABS, ARG0_LOW),
        jump(JSET_K, CLONE_NEWUSER, 0, 1),
        stmt(RET_K, RET_ERRNO | EPERM),
        stmt(RET_K, RET_ALLOW),
    ]);
    out
}

fn to_u8(n: usize) -> u8 {
    // The program is a few dozen instructions; a jump that did not fit would be a bug here.
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// The filter as `bwrap --seccomp` reads it (`struct sock_filter` after `struct sock_filter`,
/// in the machine's byte order), or `None` on an architecture it does not know, where nested
/// user namespaces are not refused (start-up says so).
pub fn nested_userns_filter() -> Option<Vec<u8>> {
    let abis = ABIS?;
    Some(encode(&program(&abis)))
}

fn encode(program: &[Insn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in program {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` on a call as the kernel would (the subset of classic BPF it uses).
    fn verdict(program: &[Insn], arch: u32, nr: u32, arg0: u32) -> u32 {
        let load = |offset: u32| match offset {
            NR => nr,
            ARCH => arch,
            ARG0_LOW => arg0,
            other => panic!("load of offset {other}"),
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let insn = program[pc];
            pc += 1;
            let taken = match insn.code {
                LD_W_ABS => {
                    acc = load(insn.k);
                    continue;
                }
                RET_K => return insn.k,
                JEQ_K => acc == insn.k,
                JGE_K => acc >= insn.k,
                JSET_K => acc & insn.k != 0,
                other => panic!("opcode {other:#x}"),
            };
            pc += usize::from(if taken { insn.jt } else { insn.jf });
        }
    }

    fn abis() -> [Abi; 2] {
        [
            Abi {
                audit_arch: 0xc000_003e,
                unshare: 272,
                clone: 56,
                refused_from: Some(0x4000_0000),
            },
            Abi {
                audit_arch: 0x4000_0003,
                unshare: 310,
                clone: 120,
                refused_from: None,
            },
        ]
    }

    #[test]
    fn new_user_namespaces_are_refused_in_every_abi_and_everything_else_allowed() {
        let abis = abis();
        let p = program(&abis);
        let eperm = RET_ERRNO | EPERM;
        let enosys = RET_ERRNO | ENOSYS;
        for abi in &abis {
            let a = abi.audit_arch;
            for call in [abi.unshare, abi.clone] {
                assert_eq!(verdict(&p, a, call, CLONE_NEWUSER), eperm);
                assert_eq!(verdict(&p, a, call, CLONE_NEWUSER | 0x11), eperm);
                // Other namespaces and plain forks are the kernel's to judge.
                assert_eq!(verdict(&p, a, call, 0x0002_0000 | 0x11), RET_ALLOW);
                assert_eq!(verdict(&p, a, call, 0), RET_ALLOW);
            }
            assert_eq!(verdict(&p, a, CLONE3, 0), enosys);
            for other in [0, 1, 59, 231, 434, 436] {
                assert_eq!(verdict(&p, a, other, CLONE_NEWUSER), RET_ALLOW, "{other}");
            }
        }
        // x32 numbers carry bit 30; an unknown architecture is refused.
        assert_eq!(
            verdict(&p, 0xc000_003e, 0x4000_0000 | 272, CLONE_NEWUSER),
            enosys
        );
        assert_eq!(verdict(&p, 0xdead_beef, 0, 0), eperm);
    }

    #[test]
    fn the_filter_is_whole_instructions_of_this_machine() {
        if let Some(bytes) = nested_userns_filter() {
            assert_eq!(bytes.len() % 8, 0);
            assert_eq!(
                bytes[..8],
                [
                    &LD_W_ABS.to_ne_bytes()[..],
                    &[0, 0],
                    &ARCH.to_ne_bytes()[..]
                ]
                .concat()[..]
            );
        }
    }
}
