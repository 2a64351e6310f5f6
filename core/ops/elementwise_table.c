/*
 * elementwise_table.c -- the one table per elementwise family: for each
 * unary and binary op, its name, its autograd node, what the backward
 * saves, how integer inputs are treated, and which Lua bindings it gets.
 * elementwise.c (dtypes, nodes), elementwise_grad.c (saved tensors) and
 * the bindings (lua/tensor_math.c, lua/functional.c register their methods
 * and F.* functions by looping over these tables) all read it.
 *
 * Adding a unary op: its enum value in cnn.h, one row here, and its
 * per-element math and derivative as cases of elementwise_ops.h's switches
 * (core/README.md has the whole recipe).  Rows are designated by the enum,
 * and the assertions below fail to compile when an enum grows without the
 * table being looked at.
 */
#include "cnn.h"

#define M CNN_LUA_METHOD
#define I CNN_LUA_INPLACE
#define F CNN_LUA_FUNCTIONAL

_Static_assert(CNN_NUNARY == 33, "a unary op was added or removed: update cnn_unary_ops");
_Static_assert(CNN_NBINARY == 14, "a binary op was added or removed: update cnn_binary_ops");

const cnn_unary_info cnn_unary_ops[CNN_NUNARY] = {
    [CNN_OP_NEG] = {"neg", "NegBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP, M | I},
    [CNN_OP_ABS] = {"abs", "AbsBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP, M | I},
    [CNN_OP_EXP] = {"exp", "ExpBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT, M | I},
    [CNN_OP_LOG] = {"log", "LogBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, M | I},
    [CNN_OP_SQRT] = {"sqrt", "SqrtBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT, M | I},
    [CNN_OP_RSQRT] = {"rsqrt", "RsqrtBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT, M},
    [CNN_OP_TANH] = {"tanh", "TanhBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT, M | I | F},
    [CNN_OP_SIGMOID] = {"sigmoid", "SigmoidBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT,
                        M | I | F},
    [CNN_OP_RELU] = {"relu", "ReluBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP, M | I | F},
    [CNN_OP_SIN] = {"sin", "SinBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, M},
    [CNN_OP_COS] = {"cos", "CosBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, M},
    [CNN_OP_SIGN] = {"sign", "SignBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP, M},
    [CNN_OP_FLOOR] = {"floor", "FloorBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP, M | I},
    [CNN_OP_CEIL] = {"ceil", "CeilBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP, M | I},
    [CNN_OP_ROUND] = {"round", "RoundBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP, M | I},
    [CNN_OP_RECIPROCAL] = {"reciprocal", "ReciprocalBackward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT,
                           M | I},
    [CNN_OP_SQUARE] = {"square", "SquareBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP, M | I},
    [CNN_OP_GELU] = {"gelu", "GeluBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT,
                     M}, /* F.gelu: lua/activations.c */
    [CNN_OP_LOG1P] = {"log1p", "Log1pBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, M | I},
    [CNN_OP_EXPM1] = {"expm1", "Expm1Backward", CNN_SAVES_OUTPUT, CNN_INTS_TO_FLOAT, M | I},
    /* parameterised: bound by hand in lua/ (defaults, option checks) */
    [CNN_OP_LEAKY_RELU] = {"leaky_relu", "LeakyReluBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT,
                           0},
    [CNN_OP_ELU] = {"elu", "EluBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, 0},
    [CNN_OP_CLAMP] = {"clamp", "ClampBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP, 0},
    [CNN_OP_POW_SCALAR] = {"pow", "PowBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP_POWER, 0},
    [CNN_OP_ADD_SCALAR] = {"add", "AddBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP_INTEGRAL, 0},
    [CNN_OP_MUL_SCALAR] = {"mul", "MulBackward", CNN_SAVES_NOTHING, CNN_INTS_KEEP_INTEGRAL, 0},
    /* activations beyond relu/sigmoid/tanh: F.* bound by hand where they take options */
    [CNN_OP_HARDTANH] = {"hardtanh", "HardtanhBackward", CNN_SAVES_INPUT, CNN_INTS_KEEP, 0},
    [CNN_OP_SILU] = {"silu", "SiluBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, F},
    [CNN_OP_HARDSWISH] = {"hardswish", "HardswishBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, F},
    [CNN_OP_HARDSIGMOID] = {"hardsigmoid", "HardsigmoidBackward", CNN_SAVES_INPUT,
                            CNN_INTS_TO_FLOAT, F},
    [CNN_OP_MISH] = {"mish", "MishBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, F},
    [CNN_OP_GELU_TANH] = {"gelu", "GeluBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, 0},
    [CNN_OP_SOFTPLUS] = {"softplus", "SoftplusBackward", CNN_SAVES_INPUT, CNN_INTS_TO_FLOAT, 0},
};

const cnn_binary_info cnn_binary_ops[CNN_NBINARY] = {
    [CNN_OP_ADD] = {"add", "AddBackward", CNN_SAVES_NOTHING, M | I},
    [CNN_OP_SUB] = {"sub", "SubBackward", CNN_SAVES_NOTHING, M | I},
    [CNN_OP_MUL] = {"mul", "MulBackward", CNN_SAVES_INPUT, M | I},
    [CNN_OP_DIV] = {"div", "DivBackward", CNN_SAVES_ALL, M | I},
    [CNN_OP_POW] = {"pow", "PowBackward", CNN_SAVES_ALL, I}, /* method: pow takes numbers too */
    [CNN_OP_MAXIMUM] = {"maximum", "MaximumBackward", CNN_SAVES_INPUT, M},
    [CNN_OP_MINIMUM] = {"minimum", "MinimumBackward", CNN_SAVES_INPUT, M},
    /* cnn.fused.add_relu (lua/fused.c); saves its output, relu's mask */
    [CNN_OP_ADD_RELU] = {"add_relu", "AddReluBackward", CNN_SAVES_OUTPUT, 0},
    [CNN_OP_EQ] = {"eq", NULL, CNN_SAVES_NOTHING, M},
    [CNN_OP_NE] = {"ne", NULL, CNN_SAVES_NOTHING, M},
    [CNN_OP_LT] = {"lt", NULL, CNN_SAVES_NOTHING, M},
    [CNN_OP_LE] = {"le", NULL, CNN_SAVES_NOTHING, M},
    [CNN_OP_GT] = {"gt", NULL, CNN_SAVES_NOTHING, M},
    [CNN_OP_GE] = {"ge", NULL, CNN_SAVES_NOTHING, M},
};

const char *cnn_binary_name(cnn_binary_op op) {
  return (unsigned)op < CNN_NBINARY ? cnn_binary_ops[op].name : "?";
}
const char *cnn_unary_name(cnn_unary_op op) {
  return (unsigned)op < CNN_NUNARY ? cnn_unary_ops[op].name : "?";
}
