"""Megatron-LM's ``pretrain`` / ``train`` / ``train_step`` on the CPU with real megatron-core.

``pretrain``, ``train`` and ``train_step`` take the signatures of the Megatron-LM version named
by ``MEGATRON_STANDIN_VERSION`` (see ``_harness``). The loop keeps the behaviour a profiling
plugin depends on: ``train_step`` is looked up as a module global on every iteration,
``--iterations-to-skip`` bypasses it, Megatron's own ``--profile`` block runs as upstream, and
every early exit ends in ``sys.exit`` inside ``train``.
"""

import os
import sys
import time

import torch
from megatron.core import mpu
from megatron.core.distributed import finalize_model_grads
from megatron.core.num_microbatches_calculator import get_num_microbatches
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.rerun_state_machine import get_rerun_state_machine
from megatron.core.utils import get_model_config

from megatron.training import _harness
from megatron.training.checkpointing import save_checkpoint
from megatron.training.global_vars import get_args, get_signal_handler
from megatron.training.initialize import initialize_megatron
from megatron.training.model_and_data import (  # noqa: F401  (upstream names live in training)
    build_train_valid_test_data_iterators,
    get_model,
    setup_model_and_optimizer,
    update_train_iters,
)
from megatron.training.utils import print_rank_0, print_rank_last

try:  # Megatron-LM's own RL (core_v0.15+): not in the megatron-core wheel, as upstream
    from megatron.rl import rl_utils
    has_rl_utils = True
except ImportError:
    has_rl_utils = False

_TRAIN_START_TIME = time.time()


def _pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
              process_non_loss_data_func, extra_args_provider, args_defaults, get_embedding_ranks,
              get_position_embedding_ranks, non_loss_data_func, store, train_kwargs=None):
    with _harness.report.outcome():
        initialize_megatron(
            extra_args_provider=extra_args_provider,
            args_defaults=args_defaults,
            get_embedding_ranks=get_embedding_ranks,
            get_position_embedding_ranks=get_position_embedding_ranks,
            store=store,
        )
        args = get_args()
        _harness.report.update(tp=args.tensor_model_parallel_size,
                               pp=args.pipeline_model_parallel_size, dp=args.data_parallel_size)
        global _TRAIN_START_TIME
        start_time = torch.tensor([_TRAIN_START_TIME], dtype=torch.double, device="cuda")
        torch.distributed.all_reduce(start_time, op=torch.distributed.ReduceOp.MIN)
        _TRAIN_START_TIME = start_time.item()

        checkpointing_context = {}
        model, optimizer, opt_param_scheduler = setup_model_and_optimizer(
            model_provider, model_type, checkpointing_context=checkpointing_context)
        config = get_model_config(model[0])
        train_data_iterator, valid_data_iterator, test_data_iterator = \
            build_train_valid_test_data_iterators(train_valid_test_dataset_provider)

        print_rank_0("training ...")
        iteration = 0
        num_floating_point_operations_so_far = 0
        if args.do_train and args.train_iters > 0:
            train_args = (forward_step_func, model, optimizer, opt_param_scheduler,
                          train_data_iterator, valid_data_iterator, process_non_loss_data_func,
                          config, checkpointing_context, non_loss_data_func)
            if _harness.VERSION >= (0, 16):
                train_args += (None,)  # inference_model, passed positionally upstream
            # A module-global lookup, so a plugin's wrapper around train() is what runs.
            iteration, num_floating_point_operations_so_far = train(*train_args,
                                                                    **(train_kwargs or {}))
        if getattr(args, "perform_rl_step", False) and has_rl_utils:
            rl_utils.rl_inference_interface_shutdown()  # from 0.17: os._exit(0), as upstream

        if args.save and iteration != 0 and iteration % args.save_interval != 0:
            save_checkpoint(iteration, model, optimizer, opt_param_scheduler,
                            num_floating_point_operations_so_far)
        for prefix, data_iterator, wanted in (
            (f"iteration {iteration} on validation set", valid_data_iterator, args.do_valid),
            (f"iteration {iteration} on test set", test_data_iterator, args.do_test),
        ):
            if wanted:
                evaluate_and_print_results(prefix, forward_step_func, data_iterator, model,
                                           iteration, process_non_loss_data_func, config)


if _harness.VERSION >= (0, 19):

    def pretrain(cfg_container, train_valid_test_dataset_provider, model_type, forward_step_func,
                 model_provider=None, process_non_loss_data_func=None, get_embedding_ranks=None,
                 get_position_embedding_ranks=None, non_loss_data_func=None, store=None,
                 inprocess_call_wrapper=None, p2p_communicator=None, pg_collection=None,
                 skip_model_parallel_init=False):
        """Initialise Megatron, build model, optimizer and data, then train (0.19: the model
        may come from the config container; the stand-in takes model_provider)."""
        if inprocess_call_wrapper is not None:
            raise NotImplementedError("the CPU stand-in does not emulate in-process restart")
        _pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                  process_non_loss_data_func, None, {}, get_embedding_ranks,
                  get_position_embedding_ranks, non_loss_data_func, store,
                  train_kwargs={"p2p_communicator": p2p_communicator,
                                "pg_collection": pg_collection})

elif _harness.VERSION >= (0, 18):

    def pretrain(cfg_container, train_valid_test_dataset_provider, model_provider, model_type,
                 forward_step_func, process_non_loss_data_func=None, get_embedding_ranks=None,
                 get_position_embedding_ranks=None, non_loss_data_func=None, store=None,
                 inprocess_call_wrapper=None):
        """Initialise Megatron (args already parsed by the entry script), build, then train."""
        if inprocess_call_wrapper is not None:
            raise NotImplementedError("the CPU stand-in does not emulate in-process restart")
        _pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                  process_non_loss_data_func, None, {}, get_embedding_ranks,
                  get_position_embedding_ranks, non_loss_data_func, store)

elif _harness.VERSION >= (0, 13):

    def pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                 process_non_loss_data_func=None, extra_args_provider=None, args_defaults={},
                 get_embedding_ranks=None, get_position_embedding_ranks=None,
                 non_loss_data_func=None, store=None, inprocess_call_wrapper=None):
        """Initialise Megatron, build model, optimizer and data, then train."""
        if inprocess_call_wrapper is not None:
            raise NotImplementedError("the CPU stand-in does not emulate in-process restart")
        _pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                  process_non_loss_data_func, extra_args_provider, args_defaults,
                  get_embedding_ranks, get_position_embedding_ranks, non_loss_data_func, store)

else:

    def pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                 process_non_loss_data_func=None, extra_args_provider=None, args_defaults={},
                 get_embedding_ranks=None, get_position_embedding_ranks=None,
                 non_loss_data_func=None):
        """Initialise Megatron, build model, optimizer and data, then train."""
        _pretrain(train_valid_test_dataset_provider, model_provider, model_type, forward_step_func,
                  process_non_loss_data_func, extra_args_provider, args_defaults,
                  get_embedding_ranks, get_position_embedding_ranks, non_loss_data_func, None)


def _average_losses(losses_reduced):
    """Token-weighted mean over micro-batches and data-parallel ranks (Megatron >= 0.10)."""
    averaged = {}
    for key in losses_reduced[0]:
        total = torch.vstack([step[key].view(-1) for step in losses_reduced]).sum(dim=0)
        torch.distributed.all_reduce(total, group=mpu.get_data_parallel_group())
        averaged[key] = total[0] / total[1]
    return averaged


def _run_train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,
                    forward_backward_func):
    """The body every version's ``train_step`` shares; returns 0.16's 8-tuple."""
    args = get_args()
    logged_iteration = args.curr_iteration + 1
    _harness.report.record_step(logged_iteration)
    _harness.faults.at_step(logged_iteration)
    forward_step_func = _harness.faults.slow_forward(forward_step_func, logged_iteration)

    rerun_state_machine = get_rerun_state_machine()
    while rerun_state_machine.should_run_forward_backward(data_iterator):
        for chunk in model:
            chunk.zero_grad_buffer()
        optimizer.zero_grad()
        losses_reduced = forward_backward_func(
            forward_step_func=_harness.faults.slowed_forward(forward_step_func),
            data_iterator=data_iterator, model=model,
            num_microbatches=get_num_microbatches(), seq_length=args.seq_length,
            micro_batch_size=args.micro_batch_size, decoder_seq_length=None, forward_only=False)
    should_checkpoint, should_exit, exit_code = rerun_state_machine.should_checkpoint_and_exit()
    if should_exit:
        return {}, True, should_checkpoint, should_exit, exit_code, None, None, 0

    update_successful, grad_norm, num_zeros_in_grad = optimizer.step()
    if update_successful:
        increment = get_num_microbatches() * args.micro_batch_size * args.data_parallel_size
        opt_param_scheduler.step(increment=increment)
    skipped_iter = 0 if update_successful else 1
    last_stage = mpu.is_pipeline_last_stage(ignore_virtual=True)
    loss_dict = _average_losses(losses_reduced) if last_stage else {}
    return (loss_dict, skipped_iter, should_checkpoint, should_exit, exit_code, grad_norm,
            num_zeros_in_grad, 0)


if _harness.VERSION >= (0, 19):

    def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
                   forward_backward_func, iteration=None, pg_collection=None,
                   p2p_communicator=None):
        """Single training step."""
        return _run_train_step(forward_step_func, data_iterator, model, optimizer,
                               opt_param_scheduler, forward_backward_func)

elif _harness.VERSION >= (0, 16):

    def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
                   forward_backward_func, iteration=None):
        """Single training step."""
        return _run_train_step(forward_step_func, data_iterator, model, optimizer,
                               opt_param_scheduler, forward_backward_func)

elif _harness.VERSION >= (0, 14):

    def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
                   forward_backward_func):
        """Single training step."""
        return _run_train_step(forward_step_func, data_iterator, model, optimizer,
                               opt_param_scheduler, forward_backward_func)[:7]

else:

    def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config):
        """Single training step."""
        return _run_train_step(forward_step_func, data_iterator, model, optimizer,
                               opt_param_scheduler, get_forward_backward_func())[:7]


def _call_train_step(step_args, forward_backward_func, iteration):
    """Calls the module-global ``train_step`` the way the emulated version's ``train`` does."""
    if _harness.VERSION >= (0, 19):
        result, expected = train_step(*step_args, forward_backward_func, iteration=iteration,
                                      pg_collection=None, p2p_communicator=None), 8
    elif _harness.VERSION >= (0, 16):
        result, expected = train_step(*step_args, forward_backward_func, iteration=iteration), 8
    elif _harness.VERSION >= (0, 14):
        result, expected = train_step(*step_args, forward_backward_func), 7
    else:
        result, expected = train_step(*step_args), 7
    if len(result) != expected:
        raise ValueError(f"train_step returned {len(result)} values; Megatron-LM "
                         f"{_harness.VERSION_STRING} unpacks {expected}")
    return result[:7]


def dummy_train_step(data_iterator):
    """Consume one step's micro-batches without training, as --iterations-to-skip does."""
    for _ in range(get_num_microbatches()):
        next(data_iterator)


def _profiles_this_rank(args):
    """Megatron's rank test: from 0.17 an empty --profile-ranks (its default) is every rank."""
    if _harness.VERSION >= (0, 17) and len(args.profile_ranks) == 0:
        return True
    return torch.distributed.get_rank() in args.profile_ranks


def _start_pytorch_profiler(args):
    schedule = torch.profiler.schedule(wait=max(args.profile_step_start - 1, 0),
                                       warmup=1 if args.profile_step_start > 0 else 0,
                                       active=args.profile_step_end - args.profile_step_start,
                                       repeat=1)
    if _harness.VERSION >= (0, 17):
        # 0.17+: one gzipped trace per rank beside the tensorboard dir; shapes and stacks only
        # when --pytorch-profiler-collect-shapes / -callstack ask for them.
        if args.pytorch_profiler_collect_chakra:
            raise NotImplementedError("--pytorch-profiler-collect-chakra is not emulated")
        rank = torch.distributed.get_rank()

        def trace_handler(p):
            folder = os.path.join(args.tensorboard_dir, "..", "torch_profile")
            os.makedirs(folder, exist_ok=True)
            p.export_chrome_trace(os.path.join(folder, f"rank-{rank}.json.gz"))

        options = dict(on_trace_ready=trace_handler,
                       record_shapes=args.pytorch_profiler_collect_shapes,
                       with_stack=args.pytorch_profiler_collect_callstack)
    else:
        options = dict(on_trace_ready=torch.profiler.tensorboard_trace_handler(
            args.tensorboard_dir), record_shapes=True, with_stack=True)
    prof = torch.profiler.profile(schedule=schedule, **options)
    prof.start()
    return prof


def training_log(loss_dict, iteration, learning_rate, grad_norm, skipped_iter, elapsed_ms):
    args = get_args()
    if "lm loss" in loss_dict:
        _harness.report.record_loss(iteration, loss_dict["lm loss"].item())
    if iteration % args.log_interval != 0:
        return
    line = (
        f" iteration {iteration:8d}/{args.train_iters:8d} |"
        f" consumed samples: {args.consumed_train_samples:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
        f" learning rate: {learning_rate:.6E} |"
        f" global batch size: {args.global_batch_size:5d} |"
    )
    for key, value in loss_dict.items():
        line += f" {key}: {value.item():.6E} |"
    if grad_norm is not None:
        line += f" grad norm: {grad_norm:.3f} |"
    line += f" number of skipped iterations: {skipped_iter:3d} |"
    print_rank_last(line)


def evaluate_and_print_results(prefix, forward_step_func, data_iterator, model, iteration,
                               process_non_loss_data_func, config, verbose=False,
                               write_to_tensorboard=True, non_loss_data_func=None):
    args = get_args()
    for chunk in model:
        chunk.eval()
    losses = []
    with torch.no_grad():
        for _ in range(args.eval_iters):
            losses += get_forward_backward_func()(
                forward_step_func=_harness.faults.slowed_forward(forward_step_func),
            data_iterator=data_iterator, model=model,
                num_microbatches=get_num_microbatches(), seq_length=args.seq_length,
                micro_batch_size=args.micro_batch_size, decoder_seq_length=None, forward_only=True)
    for chunk in model:
        chunk.train()
    _harness.report.record_eval(iteration)
    if losses:
        averaged = _average_losses(losses)
        values = " | ".join(f"{key} value: {value.item():.6E}" for key, value in averaged.items())
        print_rank_last(f" validation loss at {prefix} | {values} |")


def post_training_step_callbacks(model, optimizer, opt_param_scheduler, iteration, prof,
                                 num_floating_point_operations_since_last_log_event,
                                 nsys_nvtx_context=None):
    args = get_args()
    if args.profile and iteration == args.profile_step_end and _profiles_this_rank(args):
        if args.use_pytorch_profiler:
            prof.stop()
        else:
            torch.cuda.cudart().cudaProfilerStop()
            if nsys_nvtx_context is not None:
                nsys_nvtx_context.__exit__(None, None, None)
    return num_floating_point_operations_since_last_log_event


def checkpoint_and_decide_exit(model, optimizer, opt_param_scheduler, iteration,
                               num_floating_point_operations_so_far, checkpointing_context,
                               train_data_iterator):
    """Save when due and say whether to stop: SIGTERM, then wall time, then --exit-interval."""
    args = get_args()
    save = (iteration, model, optimizer, opt_param_scheduler,
            num_floating_point_operations_so_far, checkpointing_context)

    if args.exit_signal_handler and any(get_signal_handler().signals_received()):
        if args.save:
            save_checkpoint(*save)
        print_rank_0("exiting program after receiving SIGTERM.")
        return True

    saved_checkpoint = False
    if args.save and args.save_interval and iteration % args.save_interval == 0:
        save_checkpoint(*save)
        saved_checkpoint = True

    if args.exit_duration_in_mins:
        train_time = (_harness.faults.clock(iteration) - _TRAIN_START_TIME) / 60.0
        done = torch.tensor([train_time > args.exit_duration_in_mins], dtype=torch.int,
                            device="cuda")
        torch.distributed.all_reduce(done, op=torch.distributed.ReduceOp.MAX)
        if done.item():
            if args.save and not saved_checkpoint:
                save_checkpoint(*save)
            print_rank_0(f"exiting program after {train_time} minutes")
            return True

    if args.exit_interval and iteration % args.exit_interval == 0:
        if args.save and not saved_checkpoint:
            save_checkpoint(*save)
        print_rank_0(f"exiting program at iteration {iteration}")
        return True
    return False


def _train(forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator,
           valid_data_iterator, config, checkpointing_context):
    args = get_args()
    prof = None
    if args.profile and _profiles_this_rank(args) and args.use_pytorch_profiler:
        prof = _start_pytorch_profiler(args)
    _harness.report.update(start_iteration=args.iteration, train_iters=args.train_iters,
                           profile=args.profile, use_pytorch_profiler=args.use_pytorch_profiler,
                           megatron_torch_profiler=prof is not None)
    for chunk in model:
        chunk.train()
    config.grad_scale_func = optimizer.scale_loss
    config.finalize_model_grads_func = finalize_model_grads
    forward_backward_func = get_forward_backward_func()
    step_args = (forward_step_func, train_data_iterator, model, optimizer, opt_param_scheduler,
                 config)
    nsys_nvtx_context = None
    iteration = args.iteration
    should_exit, exit_code = False, 0
    buffered_rollouts = None

    while iteration < args.train_iters:
        # Re-read every iteration, as upstream: a plugin may have switched args.profile off.
        if args.profile and _profiles_this_rank(args):
            if args.use_pytorch_profiler:
                prof.step()
            elif iteration == args.profile_step_start:
                # Raises without a GPU, exactly as Megatron-LM does on a CPU build.
                torch.cuda.cudart().cudaProfilerStart()
                nsys_nvtx_context = torch.autograd.profiler.emit_nvtx(record_shapes=True)
                nsys_nvtx_context.__enter__()

        batch_size = (mpu.get_data_parallel_world_size() * args.micro_batch_size
                      * get_num_microbatches())
        # Upstream compares the 0-based loop counter: --iterations-to-skip K skips logged K+1.
        if iteration in args.iterations_to_skip:
            dummy_train_step(train_data_iterator)
            iteration += 1
            _harness.report.record_skip(iteration)
            args.consumed_train_samples += batch_size
            args.skipped_train_samples += batch_size
            continue

        args.curr_iteration = iteration
        if getattr(args, "perform_rl_step", False):
            # As upstream 0.16: rollouts and log-probs run here, before train_step.
            with torch.no_grad():
                train_data_iterator = rl_utils.get_grpo_data_iterator(
                    model, None, optimizer, iteration, None,
                    grpo_iterations=args.grpo_iterations,
                    grpo_prompts_per_step=args.grpo_prompts_per_step,
                    grpo_group_size=args.grpo_group_size,
                    global_batch_size=args.global_batch_size,
                    sequence_packing=args.rl_use_sequence_packing,
                    buffered_rollouts=buffered_rollouts,
                    is_correction=args.rl_inference_logprobs_is_correction,
                )
                buffered_rollouts = train_data_iterator
            step_args = (forward_step_func, train_data_iterator, *step_args[2:])
        step_start = time.time()
        (loss_dict, skipped_iter, should_checkpoint, should_exit, exit_code, grad_norm,
         _) = _call_train_step(step_args, forward_backward_func, iteration)
        if should_checkpoint:
            save_checkpoint(iteration, model, optimizer, opt_param_scheduler, 0,
                            checkpointing_context)
        if should_exit:
            break

        iteration += 1
        args.consumed_train_samples += batch_size
        training_log(loss_dict, iteration, optimizer.param_groups[0]["lr"], grad_norm,
                     skipped_iter, (time.time() - step_start) * 1000.0)
        if args.eval_interval and iteration % args.eval_interval == 0 and args.do_valid:
            evaluate_and_print_results(f"iteration {iteration}", forward_step_func,
                                       valid_data_iterator, model, iteration, None, config)
        post_training_step_callbacks(model, optimizer, opt_param_scheduler, iteration, prof, 0,
                                     nsys_nvtx_context)
        should_exit = checkpoint_and_decide_exit(model, optimizer, opt_param_scheduler, iteration,
                                                 0, checkpointing_context, train_data_iterator)
        if should_exit:
            break

    if should_exit:
        _harness.report.update(sys_exit_in_train={"code": exit_code, "iteration": iteration})
        if getattr(args, "perform_rl_step", False) and has_rl_utils:
            rl_utils.rl_inference_interface_shutdown()  # from 0.17: os._exit(0) before sys.exit
        sys.exit(exit_code)
    return iteration, args.num_floating_point_operations_so_far


if _harness.VERSION >= (0, 19):

    def train(forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator,
              valid_data_iterator, process_non_loss_data_func, config, checkpointing_context,
              non_loss_data_func, inference_model=None, p2p_communicator=None,
              pg_collection=None):
        """Run train_step until --train-iters, evaluating and checkpointing on the way."""
        return _train(forward_step_func, model, optimizer, opt_param_scheduler,
                      train_data_iterator, valid_data_iterator, config, checkpointing_context)

elif _harness.VERSION >= (0, 16):

    def train(forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator,
              valid_data_iterator, process_non_loss_data_func, config, checkpointing_context,
              non_loss_data_func, inference_model=None):
        """Run train_step until --train-iters, evaluating and checkpointing on the way."""
        return _train(forward_step_func, model, optimizer, opt_param_scheduler,
                      train_data_iterator, valid_data_iterator, config, checkpointing_context)

else:

    def train(forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator,
              valid_data_iterator, process_non_loss_data_func, config, checkpointing_context,
              non_loss_data_func):
        """Run train_step until --train-iters, evaluating and checkpointing on the way."""
        return _train(forward_step_func, model, optimizer, opt_param_scheduler,
                      train_data_iterator, valid_data_iterator, config, checkpointing_context)
