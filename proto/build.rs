fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    // The descriptor set feeds gRPC server reflection (grpcurl and the like
    // list and call the services without the .proto files).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("ibfabric_descriptor.bin"))
        .compile_protos(&["proto/ibfabric/v1/ibfabric.proto"], &["proto"])?;
    Ok(())
}
