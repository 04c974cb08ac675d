#!/usr/bin/env python3
"""Reference replayer, written from docs/training.md and docs/datasets.md with plain PyTorch and numpy.

    replay_ref.py [--data-dir DIR] TASK.json BEFORE.safetensors AFTER.safetensors [more jobs ...]
    replay_ref.py [--data-dir DIR] --init TASK.json EPOCH0.safetensors OUT.safetensors [more jobs ...]

Replays the epoch after BEFORE (a canonical snapshot, e.g. from `veritrain inspect WORKDIR
--epoch E --out F`) and writes the state after it as canonical safetensors (docs/snapshot.md).
Covers the zoo models mlp and cnn, on the CPU in fp32 with loss cross_entropy, on synthetic data
or on a requestor's own `tensors` data (safetensors shards, any stored input dtype, an
`eval_fraction` hold-out; replay_ref_data.py reads them), with sgd (momentum, nesterov, weight
decay), adam and adamw under the constant, step and cosine schedules (with or without warmup),
with or without gradient groups. The task's data files are looked for in its dataset.path,
relative to TASK.json's folder, or in DIR; each is checked against its SHA-256 pin first.
A portable-mode task (docs/portable.md) is handed to portable_ref.py, numpy alone, which covers
every zoo model on synthetic data. Exit status: 0 written, 3 the task is one it does not cover (tokens, mnist, cifar10, conv3d, gpt,
torchscript, mse, cuda, bf16/tf32), 2 bad input (a missing file, a pin that does not match).
--init builds the initial state (epoch 0) from the task seed instead, taking only the
`__metadata__` of EPOCH0. It shares no code with veritrain: agreeing bit for bit with it means
the documents are complete.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay_ref_data  # noqa: E402  (the sibling modules, wherever the script is run from)
import ref_common  # noqa: E402
from veritrain_zoo import DEFAULTS as MODEL_DEFAULTS, Mlp, ResNet  # noqa: E402

TRAINED = ("mlp", "cnn")
from ref_common import blobs, epoch_order, held_out_rows, images, learning_rate, power  # noqa: E402

NOT_COVERED, BAD_INPUT = 3, 2
OPTIMIZER_DEFAULTS = {"lr": 0.01, "momentum": 0.0, "nesterov": False, "weight_decay": 0.0,
                      "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
SCHEDULE_DEFAULTS = {"name": "constant", "step_size": 1, "gamma": 0.1, "min_lr": 0.0, "warmup_steps": 0}
SAMPLES_DEFAULT = {"mlp": 512, "cnn": 256}


class NotCovered(Exception):
    pass


# --- optimizers --------------------------------------------------------------------------
class HandAdam:
    """Adam and AdamW as docs/training.md writes them: exp_avg by lerp (torch 1.13's Adam uses
    mul_/add_, which rounds differently), bias corrections by repeated squaring."""

    def __init__(self, o, adamw):
        self.o, self.adamw = o, adamw

    def update(self, p, grad, slot, lr, weight_decay):
        o = self.o
        if self.adamw:
            p.mul_(1.0 - lr * weight_decay)
        elif weight_decay != 0.0:
            grad = grad.add(p, alpha=weight_decay)
        slot["exp_avg"].lerp_(grad, 1.0 - o["beta1"])
        slot["exp_avg_sq"].mul_(o["beta2"]).addcmul_(grad, grad, value=1.0 - o["beta2"])
        bias1 = 1.0 - power(o["beta1"], slot["step"])
        bias2_sqrt = math.sqrt(1.0 - power(o["beta2"], slot["step"]))
        denom = (slot["exp_avg_sq"].sqrt() / bias2_sqrt).add_(o["eps"])
        p.addcdiv_(slot["exp_avg"], denom, value=-lr / bias1)


# --- safetensors -------------------------------------------------------------------------
def read_safetensors(path):
    try:
        meta, arrays = ref_common.read_safetensors(path)
    except ValueError as e:
        raise replay_ref_data.BadData(str(e))
    return meta, {name: torch.from_numpy(a) for name, a in arrays.items()}


def write_safetensors(path, tensors, meta):
    ref_common.write_safetensors(path, {n: t.detach().contiguous().numpy() for n, t in tensors.items()}, meta)


# --- the epoch ---------------------------------------------------------------------------
def load_task(path):
    task = json.load(open(path))
    task["optimizer"] = dict(OPTIMIZER_DEFAULTS, **task.get("optimizer", {}))
    task["schedule"] = dict(SCHEDULE_DEFAULTS, **task.get("schedule", {}))
    model = task["model"]["name"]
    # The zoo module file also holds conv3d and gpt (for loading exported weights); the reference
    # trains only these two.
    covered = (model in TRAINED and task["dataset"]["name"] in ("synthetic", "tensors") and
               task.get("device", "cpu") == "cpu" and task.get("precision", "fp32") == "fp32")
    if not covered:
        raise NotCovered("the reference covers mlp and cnn on synthetic or tensors data, cpu, fp32; this task is %s on %s, %s, %s"
                         % (model, task["dataset"]["name"], task.get("device", "cpu"), task.get("precision", "fp32")))
    if task.get("loss", "cross_entropy") != "cross_entropy":
        raise NotCovered("loss %r is unsupported: the reference trains with cross_entropy only" % task["loss"])
    task["model"]["options"] = dict(MODEL_DEFAULTS[model], **task["model"].get("options", {}))
    return task


def loss_of(task, out, y):
    """The task's cross_entropy, with loss_options.label_smoothing (docs/task.md, "Recipes")."""
    return F.cross_entropy(out, y, label_smoothing=task.get("loss_options", {}).get("label_smoothing", 0.0))


def grouped_step(task, net, params, x, y, groups):
    """docs/training.md, "Gradient groups": each group alone from the step's buffers, backward
    seeded with 1/G; gradients and float buffers x 1/G summed along the balanced binary tree."""
    scale = 1.0 / groups
    b = x.shape[0] // groups
    buffers = list(net.named_buffers())
    start = [t.clone() for _, t in buffers]
    pending = []  # (height, partial sum): merging equal heights in index order is the tree
    reached = set()
    for g in range(groups):
        with torch.no_grad():
            for (_, t), s in zip(buffers, start):
                t.copy_(s)
        for _, p in params:
            p.grad = None
        loss = loss_of(task, net(x[g * b:(g + 1) * b]), y[g * b:(g + 1) * b])
        (loss * scale).backward()
        reached.update(k for k, p in params if p.grad is not None)
        with torch.no_grad():
            parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for _, p in params]
            parts += [t.reshape(-1) * scale for _, t in buffers if t.is_floating_point()]
            node = (0, torch.cat(parts))
            while pending and pending[-1][0] == node[0]:
                left = pending.pop()
                node = (node[0] + 1, left[1] + node[1])
            pending.append(node)
    total, offset = pending[0][1], 0
    with torch.no_grad():
        for k, p in params:
            p.grad = total[offset:offset + p.numel()].view_as(p).clone() if k in reached else None
            offset += p.numel()
        for _, t in buffers:
            if t.is_floating_point():
                t.copy_(total[offset:offset + t.numel()].view_as(t))
                offset += t.numel()


def synthetic_data(task):
    """(N, batch of order indices) over the whole generated dataset as one tensor."""
    name, o, seed = task["model"]["name"], task["model"]["options"], task.get("seed", 0)
    samples = task["dataset"].get("options", {}).get("samples", SAMPLES_DEFAULT[name])
    if name == "mlp":
        x_all, y_all = blobs(seed, samples, o["input_dim"], o["classes"])
    else:
        x_all, y_all = images(seed, samples, o["classes"])
    inputs, targets = torch.from_numpy(x_all), torch.from_numpy(y_all)
    return samples, lambda idx: (inputs.index_select(0, idx), targets.index_select(0, idx))


def tensors_data(task, data_dir):
    """(N, batch of order indices) over the task's shards, less the eval_fraction hold-out."""
    data = replay_ref_data.open_tensors(task, data_dir)
    o, inputs = task["model"]["options"], data.shards[0].columns["inputs"][1]
    if data.target_dtype() != "I64" or data.shards[0].columns["targets"][1].ndim != 1:
        raise replay_ref_data.BadData("dataset: cross_entropy needs one I64 class id per example")
    if task["model"]["name"] == "mlp" and data.features() != o["input_dim"]:
        raise replay_ref_data.BadData("dataset: mlp expects %d input features, got %d" % (o["input_dim"], data.features()))
    if task["model"]["name"] == "cnn" and (inputs.ndim != 4 or inputs.shape[1] != 3):
        raise replay_ref_data.BadData("dataset: cnn expects [3, H, W] images")
    for s in data.shards:
        ids = s.columns["targets"][1]
        if len(ids) and (ids.min() < 0 or ids.max() >= o["classes"]):
            raise replay_ref_data.BadData("dataset: a target is not a class id in 0..%d" % (o["classes"] - 1))
    fraction = task["dataset"].get("eval_fraction", 0.0)
    if fraction > 0.0:
        if len(data) < 2:
            raise replay_ref_data.BadData("dataset.eval_fraction: nothing to hold out")
        data.keep(held_out_rows(task.get("seed", 0), len(data), fraction))
    return len(data), lambda idx: data.batch(idx.numpy())


def augmented(task, x, epoch, first):
    """docs/datasets.md, "Augmentation": torchvision's RandomCrop(size, padding, padding_mode) then
    RandomHorizontalFlip(), with veritrain's draws for example first + i of the epoch."""
    aug = task["dataset"].get("augment", {})
    if not aug.get("crop_padding", 0) and not aug.get("flip", False):
        return x
    import torchvision.transforms.functional as TF
    pad = aug.get("crop_padding", 0)
    mode = "reflect" if aug.get("padding_mode", "zero") == "reflect" else "constant"
    h, w = x.shape[2], x.shape[3]
    out = []
    for i in range(x.shape[0]):
        top, left, flip = ref_common.augment_draw(aug, task.get("seed", 0), epoch, first + i)
        img = TF.pad(x[i], [pad], padding_mode=mode) if pad > 0 else x[i]
        img = TF.crop(img, top, left, h, w)
        out.append(TF.hflip(img) if flip else img)
    return torch.stack(out)


def replay(task, meta, state, data_dir):
    torch.set_num_threads(int(meta["intra_op_threads"]))
    torch.use_deterministic_algorithms(True)
    name, o, seed = task["model"]["name"], task["model"]["options"], task.get("seed", 0)
    if task["dataset"]["name"] == "tensors":
        samples, batch_of = tensors_data(task, data_dir)
    else:
        samples, batch_of = synthetic_data(task)
    net = Mlp(o) if name == "mlp" else ResNet(o)
    with torch.no_grad():
        for key, t in list(net.named_parameters()) + list(net.named_buffers()):
            t.copy_(state["param/" + key] if "param/" + key in state else state["buffer/" + key])
    torch.set_rng_state(state["rng/cpu"])
    net.train()
    params = list(net.named_parameters())
    opt = task["optimizer"]
    slots = {}
    for key, p in params:
        prefix = "optim/" + key + "/"
        slots[key] = {k[len(prefix):]: v.clone() for k, v in state.items() if k.startswith(prefix)}
        slots[key]["step"] = int(slots[key]["step"].item())
    spared = set(opt.get("no_decay", []))  # optimizer.no_decay: a second parameter group
    if opt["name"] == "sgd":
        groups_of = [{"params": [p for k, p in params if k not in spared], "weight_decay": opt["weight_decay"]},
                     {"params": [p for k, p in params if k in spared], "weight_decay": 0.0}]
        sgd = torch.optim.SGD([g for g in groups_of if g["params"]], lr=opt["lr"], momentum=opt["momentum"],
                              dampening=0, nesterov=opt["nesterov"], foreach=False)
        for key, p in params:
            if opt["momentum"] != 0.0 and slots[key]["step"] > 0:
                sgd.state[p]["momentum_buffer"] = slots[key]["momentum_buffer"]
    else:
        adam = HandAdam(opt, opt["name"] == "adamw")

    # optimizer.ema_decay: timm's ModelEmaV2 update over the floating-point parameters and buffers.
    decay = opt.get("ema_decay", 0.0)
    ema = {k[len("ema/"):]: v.clone() for k, v in state.items() if k.startswith("ema/")}
    own = dict(list(net.named_parameters()) + list(net.named_buffers()))

    epoch, global_step = int(meta["epoch"]) + 1, int(meta["global_step"])
    batch = task["batch_size"]
    groups = task.get("gradient_groups", 1)
    steps = task.get("steps_per_epoch", 0) or max(1, samples // batch)
    order = torch.tensor(epoch_order(seed, epoch, samples, steps * batch), dtype=torch.int64)
    for s in range(steps):
        x, y = batch_of(order.narrow(0, s * batch, batch))
        x = augmented(task, x, epoch, s * batch)
        lr = learning_rate(task, global_step, epoch, steps * task["epochs"])
        if groups == 1:
            for _, p in params:
                if p.grad is not None:
                    p.grad.zero_()
            loss_of(task, net(x), y).backward()
        else:
            grouped_step(task, net, params, x, y, groups)
        if opt.get("clip_grad_norm", 0.0) > 0.0:
            norm_type = math.inf if opt.get("clip_norm", "l2") == "inf" else 2.0
            torch.nn.utils.clip_grad_norm_([p for _, p in params], opt["clip_grad_norm"], norm_type=norm_type)
        for key, p in params:
            slots[key]["step"] += p.grad is not None
        if opt["name"] == "sgd":
            for group in sgd.param_groups:
                group["lr"] = lr
            sgd.step()
        else:
            with torch.no_grad():
                for key, p in params:
                    if p.grad is not None:
                        adam.update(p, p.grad, slots[key], lr, 0.0 if key in spared else opt["weight_decay"])
        with torch.no_grad():
            for key, a in ema.items():
                a.copy_(a * decay + (1. - decay) * own[key])
        global_step += 1

    out = {"rng/cpu": torch.get_rng_state()}
    for key, t in net.named_buffers():
        out["buffer/" + key] = t
    for key, p in params:
        out["param/" + key] = p
        out["optim/%s/step" % key] = torch.tensor(slots[key]["step"], dtype=torch.int64)
        for slot in ("exp_avg", "exp_avg_sq"):
            if slot in slots[key]:
                out["optim/%s/%s" % (key, slot)] = slots[key][slot]
        if "momentum_buffer" in slots[key]:
            buf = sgd.state[p].get("momentum_buffer", slots[key]["momentum_buffer"])
            out["optim/%s/momentum_buffer" % key] = buf
    for key, a in ema.items():
        out["ema/" + key] = a
    meta = dict(meta, epoch=str(epoch), global_step=str(global_step), data_cursor=str(epoch))
    return out, meta


def initial_state(task):
    """Epoch 0 from the seed alone: the model built in construction order, optimizer slots zero."""
    torch.manual_seed(task.get("seed", 0))
    net = (Mlp if task["model"]["name"] == "mlp" else ResNet)(task["model"]["options"])
    out = {"rng/cpu": torch.get_rng_state()}
    for key, t in net.named_buffers():
        out["buffer/" + key] = t
    slots = {"sgd": ["momentum_buffer"] if task["optimizer"]["momentum"] != 0.0 else []}
    for key, p in net.named_parameters():
        out["param/" + key] = p
        out["optim/%s/step" % key] = torch.tensor(0, dtype=torch.int64)
        for slot in slots.get(task["optimizer"]["name"], ["exp_avg", "exp_avg_sq"]):
            out["optim/%s/%s" % (key, slot)] = torch.zeros_like(p)
    if task["optimizer"].get("ema_decay", 0.0) > 0.0:
        for key, t in list(net.named_parameters()) + list(net.named_buffers()):
            if t.is_floating_point():
                out["ema/" + key] = t.detach().clone()
    return out


def run(job, data_dir):
    """job: [TASK, BEFORE, AFTER] or ["--init", TASK, EPOCH0, OUT]."""
    init = job[0] == "--init"
    task_path, before, after = job[1:] if init else job
    if json.load(open(task_path)).get("determinism") == "portable":
        # veritrain's own arithmetic: its reference is numpy alone (docs/portable.md).
        import portable_ref  # noqa: E402
        try:
            return portable_ref.run(job)
        except portable_ref.NotCovered as e:
            raise NotCovered(str(e))
    task = load_task(task_path)
    if data_dir is None:  # dataset.path resolves from the task file's folder (docs/task.md)
        data_dir = os.path.join(os.path.dirname(os.path.abspath(task_path)), task["dataset"].get("path", ""))
    meta, state = read_safetensors(before)
    if init:
        out = initial_state(task)
    else:
        out, meta = replay(task, meta, state, data_dir)
    write_safetensors(after, out, meta)


def main(args):
    """Several jobs may follow one another on the command line: one interpreter start for all."""
    data_dir = None
    if args[:1] == ["--data-dir"] and len(args) > 1:
        data_dir, args = args[1], args[2:]
    for job in ref_common.split_jobs(args, __doc__):
        try:
            run(job, data_dir)
        except NotCovered as e:
            print("replay_ref: not covered: %s" % e, file=sys.stderr)
            return NOT_COVERED
        except replay_ref_data.BadData as e:
            print("replay_ref: %s" % e, file=sys.stderr)
            return BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
