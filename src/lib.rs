pub use ridge_core as core;
pub use ridge_kernels as kernels;
pub use ridge_model as model;
pub use ridge_nn as nn;
pub use ridge_tune as tune;
