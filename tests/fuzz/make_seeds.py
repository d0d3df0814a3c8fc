#!/usr/bin/env python3
"""Writes the crafted seed files of fuzz_safetensors, fuzz_idx and fuzz_json into
tests/fuzz/corpus/<name>/ (valid files, plus one file per malformation the readers must refuse).
Run from anywhere: python3 tests/fuzz/make_seeds.py"""
import gzip
import json
import os
import struct
import zlib

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- safetensors --------------------------------------------------------------------------
def st(header, data=b"", pad=True):
    if not isinstance(header, (bytes, str)):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode()
    if pad:
        header += b" " * ((8 - len(header) % 8) % 8)
    return struct.pack("<Q", len(header)) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


f32 = struct.pack("<2f", 1.0, 2.0)
put("safetensors", "valid_reference", st({"__metadata__": {"format": "pt"}, "b": entry("I64", [1], 0, 8),
                                          "a": entry("F32", [2], 8, 16)}, struct.pack("<q", 7) + f32))
put("safetensors", "valid_empty", st({}))
put("safetensors", "valid_every_dtype", st({
    "i64": entry("I64", [], 0, 8), "f64": entry("F64", [1], 8, 16), "f32": entry("F32", [1, 1], 16, 20),
    "i32": entry("I32", [1], 20, 24), "bf16": entry("BF16", [1], 24, 26), "f16": entry("F16", [1], 26, 28),
    "u8": entry("U8", [2], 28, 30), "bool": entry("BOOL", [2], 30, 32), "none": entry("F32", [0, 3], 32, 32)},
    bytes(range(30)) + b"\x00\x01"))
put("safetensors", "valid_out_of_order", st({"b": entry("F32", [2], 8, 16), "a": entry("F32", [2], 0, 8)}, f32 + f32))
put("safetensors", "valid_unknown_field", st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[{"y":null}]}}',
                                             b"\x05"))
# Shapes whose strides overflow int64 although they hold no element, or whose bytes overflow.
put("safetensors", "shape_zero_then_huge", st('{"a":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}'))
put("safetensors", "shape_bytes_overflow", st('{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}}',
                                              bytes(8)))
put("safetensors", "shape_65_dims", st('{"a":{"dtype":"U8","shape":[' + ",".join(["1"] * 65) + '],"data_offsets":[0,1]}}',
                                       b"\x01"))
put("safetensors", "shape_negative", st('{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'))
put("safetensors", "offsets_huge", st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}}'))
# BOOL bytes other than 0/1; a float NaN for the fuzz target module's I64 buffer "n".
put("safetensors", "bool_byte_2", st({"m": entry("BOOL", [2], 0, 2)}, b"\x01\x02"))
put("safetensors", "nan_for_i64_buffer", st({"n": entry("F32", [1], 0, 4), "w": entry("F16", [2], 4, 8)},
                                            struct.pack("<f", float("nan")) + bytes(4)))
# Duplicated fields, names, metadata.
put("safetensors", "dup_dtype", st('{"a":{"dtype":"F32","dtype":"I64","shape":[2],"data_offsets":[0,8]}}', f32))
put("safetensors", "dup_shape", st('{"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,8]}}', f32))
put("safetensors", "dup_offsets", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,4]}}', f32))
put("safetensors", "dup_name", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                  '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', f32 + f32))
put("safetensors", "dup_metadata", st('{"__metadata__":{"k":"1"},"__metadata__":{"j":"2"}}'))
put("safetensors", "dup_metadata_key", st('{"__metadata__":{"k":"1","k":"2"}}'))
put("safetensors", "trailing_data", st({"a": entry("F32", [2], 0, 8)}, f32 + b"x"))
put("safetensors", "truncated_data", st({"a": entry("F32", [2], 0, 8)}, f32[:7]))
put("safetensors", "header_past_end", struct.pack("<Q", 1000) + b"{}")
put("safetensors", "header_over_limit", struct.pack("<Q", 100_000_001) + b"{}")
# A large header (many tensors, long metadata) within the fuzzer's 1 MiB inputs.
many = {f"layer.{i}.weight": entry("U8", [0], 0, 0) for i in range(500)}
many["__metadata__"] = {f"k{i}": "v" * (i % 7) for i in range(500)}
put("safetensors", "many_entries", st(many))

# --- IDX (first byte: bit 0 = images, bit 1 = gzip the rest in the target) -----------------
def idx(ndims, dims, payload, type_byte=8):
    return bytes([0, 0, type_byte, ndims]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, mtime=0)


images = idx(3, [3, 2, 2], bytes(range(0, 120, 10)))
labels = idx(1, [3], bytes([9, 0, 3]))
put("idx", "raw_labels", b"\x00" + labels)
put("idx", "raw_images", b"\x01" + images)
put("idx", "gz_in_target_images", b"\x03" + images)
put("idx", "gz_in_target_labels", b"\x02" + labels)
put("idx", "gz_file_images", b"\x01" + gz(images))
put("idx", "gz_two_members", b"\x01" + gz(images[:7]) + gz(images[7:]))
put("idx", "gz_trailing_junk", b"\x01" + gz(images) + b"junk")
put("idx", "gz_trailing_zero", b"\x00" + gz(labels) + b"\x00")
put("idx", "gz_truncated", b"\x01" + gz(images)[:-5])
# A declared payload of 1 byte followed by 8 MiB of zeros in further members (a gzip bomb).
put("idx", "gz_bomb", b"\x01" + gz(idx(3, [1, 1, 1], b"\x07")) + gz(bytes(1 << 23)))
put("idx", "zero_images_huge_dims", b"\x01" + idx(3, [0, 0xFFFFFFFF, 0xFFFFFFFF], b""))
put("idx", "zero_images_huge_dims_gz", b"\x03" + idx(3, [0, 0xFFFFFFFF, 0xFFFFFFFF], b""))
put("idx", "huge_count_short_file", b"\x00" + idx(1, [0xFFFFFFFF], b"\x01\x02\x03"))
put("idx", "bad_type", b"\x01" + idx(3, [1, 1, 1], b"\x00", type_byte=0x0D))
put("idx", "too_long", b"\x00" + labels + b"x")

# --- JSON ----------------------------------------------------------------------------------
put("json", "manifest", json.dumps({"version": 1, "files": [{"path": "model.safetensors", "size": 1636232,
                                                             "sha256": "9f86d0" * 10}], "note": "é € 😀"}, indent=2))
put("json", "scalars", '[null,true,false,0,-0,1.5e-300,-12345678901234567890,18446744073709551615,"\\u00e9\\ud83d\\ude00\\n"]')
put("json", "duplicate_key", '{"a":1,"b":{"c":2,"c":3},"a":4}')
put("json", "deep", "[" * 512 + "]" * 512)
put("json", "too_deep", "[" * 600)
put("json", "many_keys", json.dumps({f"key{i}": i for i in range(2000)}, separators=(",", ":")))
put("json", "many_keys_dup_last", json.dumps({f"key{i}": i for i in range(2000)}, separators=(",", ":"))[:-1]
    + ',"key0":0}')
put("json", "long_array", "[" + ",".join(["0"] * 5000) + "]")
put("json", "bad_utf8", b'["\xff"]')
put("json", "lone_surrogate", '"\\ud800"')
