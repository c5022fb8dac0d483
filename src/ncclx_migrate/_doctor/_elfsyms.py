"""Which c10d NCCL classes a shared object references, from its dynamic symbol table.

An extension built against the legacy ``c10d::ProcessGroupNCCL`` alone keeps undefined
symbols of it (``_ZTIN4c10d16ProcessGroupNCCLE``, the typeinfo a ``dynamic_cast`` needs;
``_ZN4c10d16ProcessGroupNCCL10getCommPtrEv``, a member); one that knows nccl2 also names
``c10d::nccl2`` (``_ZTIN4c10d5nccl216ProcessGroupNCCLE``).

A torch venv holds hundreds of shared objects and pyelftools costs 7-16 ms a file before it
reads a symbol (``doctor --level static`` would take seconds). So ``_mentions`` first reads the
ELF and section headers with ``struct`` and tests ``.dynstr`` for "ProcessGroupNCCL" (the
dynamic symbols' names): well under a millisecond, and most files never name either class.
Only a file that does, or one whose section headers cannot be read that way, is read with
pyelftools, whose ``.dynsym`` symbols are the evidence. Neither reads the whole file. Any file
that is not a readable ELF object gives a one-line reason instead of an exception.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["LEGACY", "LEGACY_CONSTRUCTOR", "LEGACY_TYPEINFO", "NCCL2", "SoRefs", "read_refs"]

# Mangled name pieces: "4c10d" "16ProcessGroupNCCL" is c10d::ProcessGroupNCCL (its typeinfo,
# vtable, members, nested Options, and templates over it); "5nccl2" is the c10d::nccl2
# namespace, spelled out or after a substitution (S_, S0_...).
LEGACY = re.compile(r"4c10d16ProcessGroupNCCL")
# What a real build of each shape keeps (tests/fixtures/cxx_harness/doctor_shapes.cpp): a
# dynamic_cast, a subclass or a pybind11 parameter needs the class's typeinfo; a construction
# (make_intrusive, new) needs only a constructor (C1/C2), and no typeinfo.
LEGACY_TYPEINFO = "_ZTIN4c10d16ProcessGroupNCCLE"
LEGACY_CONSTRUCTOR = re.compile(r"^_ZN4c10d16ProcessGroupNCCLC[12]E")
NCCL2 = re.compile(r"(?:4c10d|S\d*_)5nccl2")
_NEEDLE = b"ProcessGroupNCCL"  # in .dynstr of every file that names either class
ELF_MAGIC = b"\x7fELF"
MAX_STRINGS = 256 << 20  # a .dynstr bigger than this is not an extension's
MAX_SYMBOLS = 500_000  # bounds a hostile dynamic segment; big libraries have ~100k


@dataclass
class SoRefs:
    legacy: list[str] = field(default_factory=list)  # symbol names, first seen first
    nccl2: list[str] = field(default_factory=list)

    @property
    def legacy_only(self) -> bool:
        return bool(self.legacy) and not self.nccl2

    @property
    def constructor(self) -> str | None:
        """The legacy constructor it calls, where it never needs the class's typeinfo: it builds
        its own legacy group and casts none to it (a static_cast of torch's backend would not
        show; the doctor's docs say so)."""
        if LEGACY_TYPEINFO in self.legacy:
            return None
        return next((s for s in self.legacy if LEGACY_CONSTRUCTOR.match(s)), None)


def read_refs(path: str) -> SoRefs | str:
    """The legacy/nccl2 symbols ``path`` names, or why it was not read (not ELF, corrupt...)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot open it ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as fh:
        try:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return "not a regular file"
            if fh.read(4) != ELF_MAGIC:
                return "not an ELF file"
            if _mentions(fh, st.st_size) is False:
                return SoRefs()
            fh.seek(0)
            return _read(fh, st.st_size)
        except ImportError:
            return "pyelftools is not installed (pip install pyelftools)"
        except Exception as exc:  # a corrupt or hostile file may raise anything from the parser
            return f"not a readable ELF file ({type(exc).__name__})"


# ELF header fields after e_ident (e_type ... e_shstrndx) and one section header, by class.
_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_SHDR = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}
SHT_DYNSYM = 11
MAX_SECTIONS = 1 << 16


def _mentions(fh: BinaryIO, size: int) -> bool | None:
    """Whether .dynstr holds "ProcessGroupNCCL"; None when the headers do not say (pyelftools
    reads such a file, or rejects it)."""
    fh.seek(0)
    ident = fh.read(16)
    if len(ident) < 16 or ident[4] not in _EHDR or ident[5] not in (1, 2):
        return None
    order = "<" if ident[5] == 1 else ">"
    ehdr = struct.Struct(order + _EHDR[ident[4]])
    shdr = struct.Struct(order + _SHDR[ident[4]])
    head = fh.read(ehdr.size)
    if len(head) < ehdr.size:
        return None
    fields = ehdr.unpack(head)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    if not shoff or shentsize != shdr.size or not 0 < shnum < MAX_SECTIONS or shoff + shnum * shentsize > size:
        return None
    fh.seek(shoff)
    table = fh.read(shnum * shentsize)
    sections = [shdr.unpack_from(table, i * shentsize) for i in range(shnum)]
    for sec in sections:
        if sec[1] == SHT_DYNSYM and sec[6] < shnum:
            offset, length = sections[sec[6]][4], sections[sec[6]][5]
            if offset + length > size or length > MAX_STRINGS:
                return None
            fh.seek(offset)
            return _NEEDLE in fh.read(length)
    return None


def _read(fh: BinaryIO, size: int) -> SoRefs | str:
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    elf = ELFFile(fh)
    strings = elf.get_section_by_name(".dynstr")
    symbols = elf.get_section_by_name(".dynsym")
    refs = SoRefs()
    if strings is not None and isinstance(symbols, SymbolTableSection):
        if not 0 <= strings["sh_offset"] <= strings["sh_offset"] + strings["sh_size"] <= size:
            return "corrupt ELF file (.dynstr lies outside the file)"
        if strings["sh_size"] > MAX_STRINGS:
            return f"a .dynstr of {strings['sh_size'] >> 20} MB is too big to be an extension's"
        if _NEEDLE not in strings.data():
            return refs
        names = (sym.name for sym in symbols.iter_symbols())
    else:  # section headers stripped: the dynamic segment still lists the symbols
        seg = next((s for s in elf.iter_segments() if isinstance(s, DynamicSegment)), None)
        if seg is None:
            return refs  # statically linked: no dynamic symbols
        names = (sym.name for sym in seg.iter_symbols())
    for n, name in enumerate(names):
        if n >= MAX_SYMBOLS:
            break
        if "ProcessGroupNCCL" not in name and "nccl2" not in name:
            continue
        if NCCL2.search(name):
            refs.nccl2.append(name)
        elif LEGACY.search(name):
            refs.legacy.append(name)
    return refs
