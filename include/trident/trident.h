// trident's C++ API in one include: load a model (zoo or ONNX), compile it for inference or
// training on a device, run and train it on host buffers, save and load its weights. Every
// failure is a trident::Error whose message is one sentence.
//
//   trident::Network net(trident::Model::zoo("fmnist_cnn"), {.batch = 8});
//   std::vector<float> logits = net.infer(images);  // images: 8x1x28x28 floats, NCHW
#pragma once

#include "trident/error.h"
#include "trident/model.h"
#include "trident/network.h"
