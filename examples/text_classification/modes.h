// text_classification's two modes (main.cpp picks one by the first argument).
#pragma once

// Fine-tuning a BERT sequence classifier on the fortunes task (finetune.cpp).
int finetune_main(int argc, char** argv);
// `text_classification pretrain ...`: masked-language-model pretraining over the fortunes (pretrain.cpp).
int pretrain_main(int argc, char** argv);
