"""pglogical_py.logical: the decoding core (decode.c, snapbuild.c, reorderbuffer.c, logical.c).

Records from ``pglogical_py.wal.xlogreader`` go into ``LogicalDecodingContext.decode``;
decode.py hands them to the snapshot builder and the reorder buffer, which replays each
committed transaction to an output plugin (an ``OutputPlugin``) through logical.c's
wrappers.  See docs/output-plugins.md.
"""

from __future__ import annotations

from .logical import (
    OUTPUT_PLUGIN_BINARY_OUTPUT,
    OUTPUT_PLUGIN_TEXTUAL_OUTPUT,
    LogicalDecodingContext,
    OutputPlugin,
    OutputPluginOptions,
)
from .reorderbuffer import ChangeType, ReorderBuffer, ReorderBufferChange, ReorderBufferTXN
from .snapbuild import SnapBuild, SnapBuildState

__all__ = [
    "OUTPUT_PLUGIN_BINARY_OUTPUT",
    "OUTPUT_PLUGIN_TEXTUAL_OUTPUT",
    "ChangeType",
    "LogicalDecodingContext",
    "OutputPlugin",
    "OutputPluginOptions",
    "ReorderBuffer",
    "ReorderBufferChange",
    "ReorderBufferTXN",
    "SnapBuild",
    "SnapBuildState",
]
