"""Megatron-LM >= 0.17's bridge between argument dataclasses and argparse, reduced.

``ArgumentGroupFactory(ProfilingConfig).build_group(parser, "profiling")`` adds one flag per
field as upstream does: ``--field-name`` (or the metadata's ``arg_names``/``dest``), booleans that
default to False as ``store_true``, ``list[int]`` as ``nargs='+', type=int`` with the field's
default. From 0.18 the entry scripts turn the validated args into a config container
(``pretrain_cfg_container_from_args``) and hand it to ``pretrain``.
"""

import dataclasses
import types
import typing

from megatron.training import _harness

if _harness.VERSION < (0, 17):
    raise ImportError("megatron.training.argument_utils has no ArgumentGroupFactory in "
                      f"Megatron-LM {_harness.VERSION_STRING}")


class ArgumentGroupFactory:
    def __init__(self, src_cfg_class, exclude=None):
        self.src_cfg_class = src_cfg_class
        self.exclude = set(exclude or ())

    def _kwargs(self, attribute, hints):
        meta = dict(attribute.metadata.get("argparse_meta", {}))
        names = meta.pop("arg_names", ["--" + attribute.name.replace("_", "-")])
        kwargs = {"dest": meta.pop("dest", attribute.name)}
        hint = hints[attribute.name]
        default = (attribute.default_factory() if attribute.default_factory
                   is not dataclasses.MISSING else attribute.default)
        if hint is bool:
            kwargs["action"] = "store_true" if default is False else "store_false"
        elif typing.get_origin(hint) is list:
            kwargs.update(nargs="+", type=typing.get_args(hint)[0], default=default)
        else:
            kwargs.update(type=hint, default=default)
        kwargs.update(meta)
        return names, kwargs

    def build_group(self, parser, title=None):
        group = parser.add_argument_group(title=title or self.src_cfg_class.__name__)
        hints = typing.get_type_hints(self.src_cfg_class)
        for attribute in dataclasses.fields(self.src_cfg_class):
            if attribute.name not in self.exclude:
                names, kwargs = self._kwargs(attribute, hints)
                group.add_argument(*names, **kwargs)
        return group


def pretrain_cfg_container_from_args(args, model_cfg=None):
    """The config container 0.18+'s ``pretrain`` takes first; built from the validated args, so
    it sees ``args.profile`` as a plugin left it (upstream: ``use_nsys_profiler = args.profile``)."""
    from megatron.training.config import ProfilingConfig

    if _harness.VERSION < (0, 18):
        raise ImportError("pretrain_cfg_container_from_args is new in Megatron-LM 0.18")
    names = [f.name for f in dataclasses.fields(ProfilingConfig) if f.name != "use_nsys_profiler"]
    profiling = ProfilingConfig(use_nsys_profiler=args.profile,
                                **{name: getattr(args, name) for name in names})
    return types.SimpleNamespace(profiling=profiling, model=model_cfg, args=args)
